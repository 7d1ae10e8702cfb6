/**
 * A throwaway stack of the gpuhost program under the real engine: a temporary project folder whose
 * Pulumi.yaml runs this checkout (main: the project folder, whose package.json names dist/index.js),
 * a temporary file backend with the tests' passphrase, and a stack config copied from one of stacks/
 * with overrides. Nothing is written into the checkout except the simulated host folder the config
 * names (tests give each stack its own).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { StackOutputs } from "../../stack/outputs";
import { EngineOptions, EngineResult, PROJECT_ROOT, ensureStack, runPulumi } from "../../engine/pulumi";
import { type PluginSet, testEngineOptions } from "./engine";
import { execOnHost } from "../../components/host/exec";
import { simulatedConnection } from "../../sim-host/platform";
import { HostSchema, simulatedRoot } from "../../stack/config";
import { parse as parseYaml } from "yaml";
import { z } from "zod";

export interface TestStack {
  dir: string;
  stack: string;
  opts: EngineOptions;
  /** Runs pulumi on this stack; returns whatever it exits with. */
  run(...args: string[]): Promise<EngineResult>;
  /** Runs pulumi on this stack and throws (with the output) unless it exits 0. */
  ok(...args: string[]): Promise<EngineResult>;
  /** `pulumi stack output --json`, as the program declares it (not validated). */
  outputs(): Promise<StackOutputs>;
  /**
   * Ends what the stack runs and removes its temporary folders. A stack whose hosts are all simulated
   * is not destroyed: its simulated services are stopped (stopSimulatedServices), which is all a
   * destroy left behind that mattered, for a fraction of a destroy's cost (4.4 s of CPU). A test of
   * destroy runs it itself. Any other stack is destroyed (best effort).
   */
  dispose(): Promise<void>;
}

export interface StackSetting {
  path: string;
  value: string;
  secret?: boolean;
  /** `pulumi config set --type`: with --path the CLI reads integers and booleans, but keeps "0.01" a string. */
  type?: "float" | "int" | "bool" | "string";
}

/**
 * The `sim` stack's host renamed to NAME (its own folder .gpuhost/sim-hosts/NAME): the host entry and
 * the drift check's machine, which the base config names by the host's name (`kind: host`).
 */
export function simHostNamed(name: string): StackSetting[] {
  return [
    { path: "gpuhost:hosts[0].name", value: name },
    { path: "gpuhost:operations.driftCheck.machine.name", value: name },
  ];
}

/**
 * A test's afterAll: destroys STACK where beforeAll got as far as making it (which also stops the
 * simulator), then removes FOLDERS whatever the destroy did (the simulated services' supervisors end
 * when their state folder vanishes).
 */
export async function disposeStack(stack: TestStack | undefined, ...folders: string[]): Promise<void> {
  try {
    await stack?.dispose();
  } finally {
    for (const f of folders) fs.rmSync(f, { recursive: true, force: true });
  }
}

/** A comparison's benchmark short enough for an engine test: four levels, short answers, one prompt each. */
export const SHORT_COMPARISON_BENCHMARK: StackSetting[] = [
  { path: "gpuhost:benchmark.concurrency[0]", value: "1" },
  { path: "gpuhost:benchmark.concurrency[1]", value: "4" },
  { path: "gpuhost:benchmark.concurrency[2]", value: "16" },
  { path: "gpuhost:benchmark.concurrency[3]", value: "32" },
  { path: "gpuhost:benchmark.sweepMaxTokens", value: "512" },
  { path: "gpuhost:benchmark.singleRequestMaxTokens[0]", value: "256" },
  { path: "gpuhost:benchmark.singleRequestMaxTokens[1]", value: "512" },
  { path: "gpuhost:benchmark.singleRequestPrompts", value: "1" },
];

/** SETTINGS in order: runs of untyped ones together, each typed one alone (set-all has no --type). */
function settingGroups(settings: StackSetting[]): StackSetting[][] {
  const groups: StackSetting[][] = [];
  for (const s of settings) {
    const last = groups.at(-1);
    if (!s.type && last && !last[0].type) last.push(s);
    else groups.push([s]);
  }
  return groups;
}

export async function createTestStack(
  base: string,
  settings: StackSetting[],
  timeoutMs = 300_000,
  plugins: PluginSet = "stand-ins",
  /** Where the stack's folder (its project file, config and state) is made; default the temp folder. */
  parent: string = os.tmpdir(),
): Promise<TestStack> {
  const dir = fs.mkdtempSync(path.join(parent, "gpuhost-stack-"));
  const stack = `t${Date.now().toString(36)}`;
  const program = path.join(PROJECT_ROOT, "dist", "index.js");
  if (!fs.existsSync(program)) throw new Error(`${program} is missing: compile first (npm test does)`);
  const projectYaml = fs
    .readFileSync(path.join(PROJECT_ROOT, "Pulumi.yaml"), "utf8")
    .replace(/^main: .*$/m, `main: ${PROJECT_ROOT}`)
    .replace(/^stackConfigDir: .*$/m, "");
  fs.writeFileSync(path.join(dir, "Pulumi.yaml"), projectYaml);
  // The base config without its encryption salt: the new stack gets its own.
  const baseConfig = fs
    .readFileSync(path.join(PROJECT_ROOT, "stacks", `Pulumi.${base}.yaml`), "utf8")
    .replace(/^encryptionsalt: .*$/m, "");
  fs.writeFileSync(path.join(dir, `Pulumi.${stack}.yaml`), baseConfig);
  const opts: EngineOptions = testEngineOptions(dir, timeoutMs, plugins);
  await ensureStack(stack, opts);
  const run = (...args: string[]) => runPulumi([...args, "--stack", stack], opts);
  const ok = async (...args: string[]) => {
    const r = await run(...args);
    if (r.code !== 0) throw new Error(`pulumi ${args.join(" ")} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
    return r;
  };
  for (const group of settingGroups(settings)) {
    if (group.length === 1 && group[0].type) {
      const [s] = group;
      await ok("config", "set", "--path", s.path, s.value, ...(s.secret ? ["--secret"] : []), "--type", s.type!);
    } else {
      // One CLI start for a run of untyped settings (`set-all --path` reads values as `set --path` does).
      await ok(
        "config",
        "set-all",
        "--path",
        ...group.flatMap((s) => [s.secret ? "--secret" : "--plaintext", `${s.path}=${s.value}`]),
      );
    }
  }
  return {
    dir,
    stack,
    opts,
    run,
    ok,
    async outputs() {
      return JSON.parse((await ok("stack", "output", "--json")).stdout) as StackOutputs;
    },
    async dispose() {
      try {
        const roots = simulatedRootsOf(path.join(dir, `Pulumi.${stack}.yaml`));
        if (roots) for (const root of roots) await stopSimulatedServices(root);
        else await run("destroy", "--yes", "--skip-preview");
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/**
 * `pulumi up --json` on STACK, which must succeed: its summary's resource changes (e.g. { same: 16,
 * update: 1 }) and each resource it changed, as "op name".
 */
export async function upChanges(stack: TestStack): Promise<{ changes: Record<string, number>; changed: string[] }> {
  const r = await stack.ok("up", "--yes", "--skip-preview", "--json");
  const events = r.stdout
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map(
      (l) =>
        JSON.parse(l) as {
          summaryEvent?: { result: string; resourceChanges: Record<string, number> };
          resOutputsEvent?: { metadata?: { op: string; urn: string } };
        },
    );
  const summary = events.find((e) => e.summaryEvent)?.summaryEvent;
  if (!summary) throw new Error(`pulumi up printed no summary:\n${r.stdout.slice(-3000)}`);
  if (summary.result !== "succeeded") throw new Error(`pulumi up ${summary.result}:\n${r.stdout.slice(-3000)}`);
  const changed = events
    .map((e) => e.resOutputsEvent?.metadata)
    .filter((m): m is NonNullable<typeof m> => !!m && !["same", "refresh", "read"].includes(m.op))
    .map((m) => `${m.op} ${m.urn.slice(m.urn.lastIndexOf("::") + 2)}`);
  return { changes: summary.resourceChanges, changed };
}

/**
 * The folders of the hosts a stack config file (Pulumi.<stack>.yaml) names, when every one of them is
 * simulated; undefined when one is not (or the file names none, or cannot be read).
 */
export function simulatedRootsOf(configFile: string): string[] | undefined {
  let hosts: unknown;
  try {
    hosts = (parseYaml(fs.readFileSync(configFile, "utf8")) as { config?: Record<string, unknown> } | null)?.config?.[
      "gpuhost:hosts"
    ];
  } catch {
    return undefined;
  }
  // Read as the program reads them (its own schema): a config it would refuse is the engine's to judge.
  const parsed = z.array(HostSchema).min(1).safeParse(hosts);
  if (!parsed.success || parsed.data.some((h) => h.connection.kind !== "simulated")) return undefined;
  try {
    return parsed.data.map((h, i) => simulatedRoot(h, PROJECT_ROOT, i));
  } catch {
    return undefined; // a root the program itself would refuse: the engine's destroy says what it makes of it
  }
}

/**
 * Stops every unit the simulated host in ROOT has started, with its own `systemctl stop` (each unit's
 * supervisor stops its service, SIGKILL after 5 s, and ends): what a test's teardown needs of a
 * destroy. A host never brought up has none.
 */
export async function stopSimulatedServices(root: string): Promise<void> {
  const dir = path.join(root, "run", "gpuhost-sim", "systemd");
  const units = fs.existsSync(dir) ? fs.readdirSync(dir).filter((u) => /^[\w@.-]+\.(service|timer)$/.test(u)) : [];
  if (units.length > 0) await onSimulatedHost(root, `systemctl stop ${units.join(" ")}`);
}

/** SCRIPT (bash, -euo pipefail) on the simulated host whose folder is ROOT; its stdout, or throws with its stderr. */
export async function onSimulatedHost(root: string, script: string): Promise<string> {
  const r = await execOnHost(simulatedConnection(root), `set -euo pipefail\n${script}`, [], { timeoutMs: 60_000 });
  if (r.code !== 0) throw new Error(`host script failed (${r.code}): ${r.stderr}`);
  return r.stdout;
}
