/**
 * Runs the real Pulumi CLI with the project's environment: the CLI and plugin launchers from
 * .gpuhost/engine/bin first on PATH, a local file backend, the passphrase secrets provider, and no
 * plugin downloads. The demo, the drift report and the engine tests all go through here, so they
 * drive the engine the same way a person following the README does.
 */
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { projectRoot } from "../components/host/project-root";

/** The gpuhost project root (engine/pulumi.ts runs from <root>/engine or <root>/dist/engine). */
export const PROJECT_ROOT = projectRoot();

/**
 * The passphrase of the embedded and test stacks. It is deliberately not a secret: those stacks hold
 * no real credentials, and anyone must be able to run them. Real stacks set their own
 * PULUMI_CONFIG_PASSPHRASE (or another secrets provider); an already-set value is never overridden.
 */
export const EMBEDDED_PASSPHRASE = "gpuhost-embedded-stacks-passphrase-not-a-secret";

export interface EngineOptions {
  /** Project directory (holds Pulumi.yaml). Default: the gpuhost project. */
  cwd?: string;
  /** State directory for the file backend. Default: <project>/.gpuhost/state. */
  stateDir?: string;
  env?: NodeJS.ProcessEnv;
  /** Called with each chunk of output as it arrives (for live progress). */
  onOutput?: (chunk: string) => void;
  /** Kill the CLI after this many milliseconds. */
  timeoutMs?: number;
}

export interface EngineResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function engineEnv(opts: EngineOptions = {}): NodeJS.ProcessEnv {
  const cwd = opts.cwd ?? PROJECT_ROOT;
  const stateDir = opts.stateDir ?? path.join(cwd, ".gpuhost", "state");
  fs.mkdirSync(stateDir, { recursive: true });
  const bin = path.join(PROJECT_ROOT, ".gpuhost", "engine", "bin");
  const home = path.join(PROJECT_ROOT, ".gpuhost", "pulumi-home");
  return {
    ...process.env,
    PATH: `${bin}${path.delimiter}${process.env.PATH ?? ""}`,
    PULUMI_HOME: home,
    PULUMI_BACKEND_URL: `file://${stateDir}`,
    PULUMI_CONFIG_PASSPHRASE: process.env.PULUMI_CONFIG_PASSPHRASE ?? EMBEDDED_PASSPHRASE,
    PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: "true",
    PULUMI_SKIP_UPDATE_CHECK: "true",
    PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK: "true",
    PULUMI_DIY_BACKEND_NO_LEGACY_WARNING: "true",
    NO_COLOR: "1",
    ...opts.env,
  };
}

export function runPulumi(args: string[], opts: EngineOptions = {}): Promise<EngineResult> {
  const bin = path.join(PROJECT_ROOT, ".gpuhost", "engine", "bin", "pulumi");
  if (!fs.existsSync(bin)) {
    return Promise.reject(new Error(`${bin} is missing: run \`npm run setup\` (engine/setup.sh) first`));
  }
  return new Promise((resolve, reject) => {
    const child = spawn(bin, [...args, "--non-interactive"], {
      cwd: opts.cwd ?? PROJECT_ROOT,
      env: engineEnv(opts),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    const timer = opts.timeoutMs ? setTimeout(() => child.kill("SIGTERM"), opts.timeoutMs) : undefined;
    child.stdout.on("data", (b: Buffer) => {
      stdout += b;
      opts.onOutput?.(b.toString());
    });
    child.stderr.on("data", (b: Buffer) => {
      stderr += b;
      opts.onOutput?.(b.toString());
    });
    child.on("error", reject);
    child.on("close", (code) => {
      if (timer) clearTimeout(timer);
      resolve({ code: code ?? 1, stdout, stderr });
    });
  });
}

/** Selects STACK, creating it with the passphrase secrets provider when it does not exist yet. */
export async function ensureStack(stack: string, opts: EngineOptions = {}): Promise<void> {
  const sel = await runPulumi(["stack", "select", stack], opts);
  if (sel.code === 0) return;
  const init = await runPulumi(["stack", "init", stack, "--secrets-provider", "passphrase"], opts);
  if (init.code !== 0) throw new Error(`pulumi stack init ${stack} failed:\n${init.stdout}${init.stderr}`);
}
