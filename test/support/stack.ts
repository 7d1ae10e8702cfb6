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
  /** Destroys the stack (best effort) and removes the temporary folders. */
  dispose(): Promise<void>;
}

export interface StackSetting {
  path: string;
  value: string;
  secret?: boolean;
}

export async function createTestStack(
  base: string,
  settings: StackSetting[],
  timeoutMs = 300_000,
  plugins: PluginSet = "stand-ins",
): Promise<TestStack> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-stack-"));
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
  for (const s of settings) {
    await ok("config", "set", "--path", s.path, s.value, ...(s.secret ? ["--secret"] : []));
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
        await run("destroy", "--yes", "--skip-preview");
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
