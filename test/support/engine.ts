/**
 * Engine options for the tests' throwaway stacks, and the plugin sets they run under.
 *
 * A throwaway stack gets its own file backend and this test process's random passphrase: the documented
 * passphrase belongs to the embedded `sim` stack alone, and a test stack may hold an SSH key.
 *
 * Plugin sets: "stand-ins" is whatever engine/setup.sh set up (the official plugins where installed,
 * else gpuhost's own). When GPUHOST_UPSTREAM_PLUGINS names a folder holding upstream builds of
 * pulumi-language-nodejs, pulumi-resource-pulumi-nodejs and pulumi-resource-command (CI points it at
 * them where it has them), "upstream" runs the same suites again on those: the language host and the
 * launcher first on PATH (the engine prefers PATH to the plugins beside the CLI), the command provider
 * registered in a plugin cache of its own (PULUMI_HOME), so nothing of the user's is touched.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { driftMain } from "../../cli/drift";
import type { DriftReport } from "../../components/drift/report";
import {
  type EngineOptions,
  type EngineResult,
  ensureStack,
  PROJECT_ROOT,
  pulumiBin,
  runPulumi,
} from "../../engine/pulumi";

export const TEST_PASSPHRASE = `gpuhost-test-${randomBytes(16).toString("hex")}`;

export type PluginSet = "stand-ins" | "upstream";

/** `pulumi stack export` as far as the tests read it: each resource as the state stores it. */
export interface StateExport {
  deployment: {
    resources: {
      urn: string;
      type: string;
      inputs?: Record<string, unknown>;
      outputs?: Record<string, unknown>;
      dependencies?: string[];
    }[];
  };
}

/** The folder of upstream plugin builds, when the environment names one. */
export function upstreamPluginDir(): string | undefined {
  const dir = process.env.GPUHOST_UPSTREAM_PLUGINS;
  if (!dir) return undefined;
  for (const f of ["pulumi-language-nodejs", "pulumi-resource-pulumi-nodejs", "pulumi-resource-command"]) {
    if (!fs.existsSync(path.join(dir, f))) throw new Error(`GPUHOST_UPSTREAM_PLUGINS=${dir} has no ${f}`);
  }
  return dir;
}

/** The plugin sets this run covers: always the set-up one, and upstream's when it is available. */
export const pluginSets = (): PluginSet[] => (upstreamPluginDir() ? ["stand-ins", "upstream"] : ["stand-ins"]);

let upstreamHome: string | undefined;

/** The environment that makes the engine run the upstream plugins (set up once per test process). */
export function pluginEnv(set: PluginSet): NodeJS.ProcessEnv {
  if (set === "stand-ins") return {};
  const dir = upstreamPluginDir();
  if (!dir) throw new Error("the upstream plugin set needs GPUHOST_UPSTREAM_PLUGINS");
  if (!upstreamHome) {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-upstream-home-"));
    execFileSync(
      pulumiBin(),
      ["plugin", "install", "resource", "command", "1.2.1", "--file", path.join(dir, "pulumi-resource-command")],
      { env: { ...process.env, PULUMI_HOME: home }, stdio: "pipe" },
    );
    upstreamHome = home;
    // a copy of the 34 MB provider per test process: gone with the process
    process.on("exit", () => fs.rmSync(home, { recursive: true, force: true }));
  }
  return { PATH: `${dir}${path.delimiter}${process.env.PATH ?? ""}`, PULUMI_HOME: upstreamHome };
}

/** Options for a throwaway stack in DIR: its state under DIR/state, the test passphrase, the plugin set. */
export function testEngineOptions(dir: string, timeoutMs: number, set: PluginSet = "stand-ins"): EngineOptions {
  return {
    cwd: dir,
    stateDir: path.join(dir, "state"),
    timeoutMs,
    env: { PULUMI_CONFIG_PASSPHRASE: TEST_PASSPHRASE, ...pluginEnv(set) },
  };
}

/**
 * A throwaway project in DIR whose program is the compiled file PROGRAM (npm test compiles before
 * vitest runs): its Pulumi.yaml, for the tests that run their own fixture program under the engine.
 */
export function writeFixtureProject(dir: string, name: string, program: string): void {
  if (!fs.existsSync(program)) throw new Error(`${program} is missing (run tsc first)`);
  fs.writeFileSync(
    path.join(dir, "Pulumi.yaml"),
    `name: ${name}\nruntime:\n  name: nodejs\n  options:\n    typescript: false\nmain: ${program}\n`,
  );
}

/**
 * `gpuhost drift --stack STACK` as a process of its own, as the real command runs (driftMain from
 * dist/ with its own signal handling, exiting with its code) on a test stack's engine options: the
 * arguments for node and the environment. For the tests that signal it.
 */
export function driftProcess(stack: string, opts: EngineOptions): { args: string[]; env: NodeJS.ProcessEnv } {
  const driver = `
    const { driftMain } = require(${JSON.stringify(path.join(PROJECT_ROOT, "dist", "cli", "drift.js"))});
    const { runPulumi } = require(${JSON.stringify(path.join(PROJECT_ROOT, "dist", "engine", "pulumi.js"))});
    const opts = JSON.parse(process.env.GPUHOST_TEST_ENGINE_OPTS);
    driftMain(["--stack", ${JSON.stringify(stack)}], {
      runPulumi: (args, o) => runPulumi(args, { ...opts, ...o, env: { ...opts.env, ...o.env } }),
    }).then((code) => process.exit(code));`;
  return { args: ["-e", driver], env: { ...process.env, GPUHOST_TEST_ENGINE_OPTS: JSON.stringify(opts) } };
}

/**
 * `gpuhost drift --stack STACK --json` on a test stack, in this process (the real refresh): the report,
 * the fields it names, and the refresh's own exit status.
 */
export async function driftJson(
  stack: string,
  opts: EngineOptions,
): Promise<{ report: DriftReport & { exitCode: number }; fields: string[]; pulumiCode: number }> {
  let out = "";
  let pulumiCode = -1;
  const code = await driftMain(["--stack", stack, "--json"], {
    out: (t) => void (out += t),
    err: () => undefined,
    runPulumi: async (args, o) => {
      const r = await runPulumi(args, { ...opts, env: { ...opts.env, ...o?.env } });
      pulumiCode = r.code;
      return r;
    },
  });
  const report = JSON.parse(out) as DriftReport & { exitCode: number };
  if (report.exitCode !== code) throw new Error(`gpuhost drift exited ${code} but its report says ${report.exitCode}`);
  return { report, fields: report.hosts.flatMap((h) => h.drift.map((d) => d.field)), pulumiCode };
}

/** A throwaway project running one of test/engine/fixture's programs, its stack, and where the program leaves its evidence. */
export interface FixtureWorkspace {
  work: string;
  /** The folder the program writes what it did into (its `evidenceDir` config). */
  evidence: string;
  opts: EngineOptions;
  stack: string;
  /** Runs pulumi on the stack and throws (with the output) unless it exits 0. */
  pulumi: (...args: string[]) => Promise<EngineResult>;
  /** The project file, the stack and its evidenceDir: the test's beforeAll. */
  setUp: () => Promise<void>;
}

/**
 * A fresh folder gpuhost-NAME-* for the project gpuhost-NAME-test whose program is the compiled
 * fixture PROGRAM (dist/test/engine/fixture/PROGRAM.js), on the stack NAME-test.
 */
export function fixtureWorkspace(name: string, program: string, timeoutMs: number, set?: PluginSet): FixtureWorkspace {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), `gpuhost-${name}-`));
  const evidence = path.join(work, "evidence");
  const opts = testEngineOptions(work, timeoutMs, set);
  const stack = `${name}-test`;
  const pulumi = async (...args: string[]) => {
    const r = await runPulumi([...args, "--stack", stack], opts);
    if (r.code !== 0) throw new Error(`pulumi ${args.join(" ")} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
    return r;
  };
  const setUp = async () => {
    fs.mkdirSync(evidence);
    writeFixtureProject(
      work,
      `gpuhost-${name}-test`,
      path.join(PROJECT_ROOT, "dist", "test", "engine", "fixture", `${program}.js`),
    );
    await ensureStack(stack, opts);
    await pulumi("config", "set", "evidenceDir", evidence);
  };
  return { work, evidence, opts, stack, pulumi, setUp };
}
