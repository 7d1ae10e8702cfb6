/**
 * `npm run demo`: the story (docs/story.md), rehearsed on a simulated host (cli/demo-story.ts), or
 * with --stack the embedded `sim` stack under the real engine. `npm run demo -- --help` lists the
 * options (the table below).
 */
import * as os from "node:os";
import * as path from "node:path";
import {
  EMBEDDED_STACK,
  EMBEDDED_STACKS,
  type EngineOptions,
  ensureStack,
  pendingOperations,
  pendingOperationsWarning,
  PROJECT_ROOT,
  runPulumi,
  secretsProviderProblem,
  STOP_GRACE_MS,
} from "../engine/pulumi";
import { MAX_TOKENS_BOUND } from "./bench";
import { defaultIo, EXIT, runCommand } from "./common";
import { rehearseStory } from "./demo-story";
import { fleetTable } from "./fleet-table";
import type { StackOutputs } from "../stack/outputs";
import type { CommandSpec } from "./options";

export const DEMO = {
  name: "demo",
  invocation: "npm run demo --",
  about: `The story (docs/story.md) rehearsed on a simulated host: Kimi K2.6 on 8x RTX PRO 6000, its
autoregressive, EAGLE-3 and DFlash services compared with the same workload, ending with which to
run and the plan for 900,000 completions x 2,000 tokens. Every figure is in the simulated host's
own time. --stack runs the embedded sim stack instead (pulumi up under the real engine, then its
outputs; GPUHOST_STACK names another stack); --stack --destroy tears it down.`,
  flags: {
    "time-scale": {
      type: "number",
      value: "X",
      description: "host seconds per wall second (lower is more exact on a busy machine, simulator/README.md)",
      default: 40,
    },
    levels: { type: "integers", description: "concurrencies", default: [1, 8, 16, 32, 64] },
    "output-tokens": { type: "integer", max: MAX_TOKENS_BOUND, description: "tokens per completion", default: 2000 },
    stack: { type: "boolean", description: "run the embedded sim stack under the real engine" },
    destroy: { type: "boolean", description: "with --stack: destroy it" },
  },
  exits: [
    [EXIT.ok, "ok"],
    [EXIT.failed, "no comparison, or the engine failed (its status)"],
    [EXIT.usage, "usage, or the stack's secrets are missing"],
    [EXIT.interrupted, "interrupted"],
  ],
} as const satisfies CommandSpec;

/** The stack's pending operations as a warning on stderr (a killed update leaves them; issue 19). */
async function warnPending(name: string, opts: EngineOptions): Promise<void> {
  const warning = pendingOperationsWarning(name, await pendingOperations(name, opts).catch(() => []));
  if (warning) process.stderr.write(`warning: ${warning}\n`);
}

async function stack(destroy: boolean, signal: AbortSignal): Promise<number> {
  const name = process.env.GPUHOST_STACK ?? EMBEDDED_STACK;
  const opts: EngineOptions = { embedded: EMBEDDED_STACKS.includes(name), signal };
  const problem = opts.embedded ? undefined : secretsProviderProblem(name, opts);
  if (problem) {
    process.stderr.write(`gpuhost demo: ${problem}\n`);
    return 2;
  }
  await ensureStack(name, opts);
  // `up` runs the program, which warns itself (stack/pending-operations.ts); `destroy` runs none.
  if (destroy) await warnPending(name, opts);
  const up = await runPulumi([destroy ? "destroy" : "up", "--yes", "--skip-preview", "--stack", name], {
    ...opts,
    onOutput: (chunk) => process.stdout.write(chunk),
  });
  if (up.code !== 0) {
    process.stderr.write(`\npulumi ${destroy ? "destroy" : "up"} on stack ${name} failed (exit ${up.code})\n`);
    await warnPending(name, { ...opts, signal: undefined });
    return up.code;
  }
  if (destroy) return 0;
  const out = await runPulumi(["stack", "output", "--json", "--stack", name], opts);
  process.stdout.write(`\nStack outputs (${name}):\n${out.stdout}`);
  if (out.code === 0) {
    const fleet = (JSON.parse(out.stdout) as Partial<StackOutputs>).fleet;
    if (fleet) process.stdout.write(`\n${fleetTable(fleet)}\n`);
  }
  return out.code;
}

function demoMain(argv: string[]): Promise<number> {
  return runCommand(
    DEMO,
    argv,
    defaultIo(),
    async (values, signal) => {
      if (values.stack || values.destroy) return stack(values.destroy === true, signal);
      return story(values["time-scale"], values.levels, values["output-tokens"]);
    },
    { interruptGraceMs: STOP_GRACE_MS + 3000 },
  );
}

async function story(timeScale: number, levels: number[], outputTokens: number): Promise<number> {
  const started = Date.now();
  const result = await rehearseStory({
    projectRoot: PROJECT_ROOT,
    timeScale,
    levels,
    outputTokens,
    outDir: path.join(PROJECT_ROOT, ".gpuhost", "demo"),
    say: (line) => process.stdout.write(`${line}\n`),
  });
  process.stdout.write(`(rehearsed in ${((Date.now() - started) / 1000).toFixed(0)} s of wall time)\n`);
  process.stdout.write(
    "A fleet of three simulated hosts behind SGLang's router (SMG, from PyPI), verified and measured through it: GPUHOST_STACK=sim-fleet npm run demo -- --stack\n",
  );
  // Figures are wall-clock measurements scaled up: a process kept waiting for a CPU reads slow by
  // the wait times the scale. Say so when the machine was that busy.
  const load = os.loadavg()[0];
  const cores = os.cpus().length;
  if (load > 1.5 * cores)
    process.stdout.write(
      `Note: this machine was busy (load ${load.toFixed(1)} on ${cores} cores); at time scale ${timeScale} every scheduling delay is multiplied by ${timeScale}, so the figures may read low. A lower --time-scale is more exact.\n`,
    );
  return result.comparison ? 0 : 1;
}

if (require.main === module) void demoMain(process.argv.slice(2)).then((code) => process.exit(code));
