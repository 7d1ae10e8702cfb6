/**
 * `npm run demo`: the story (docs/story.md), rehearsed on a simulated host (engine/story.ts): Kimi K2.6 on
 * 8x RTX PRO 6000, its autoregressive, EAGLE-3 and DFlash services compared with the same
 * workload, ending with which to run and the plan for 900,000 completions x 2,000 tokens.
 * Every figure is in the simulated host's own time. Options:
 *   --time-scale X   host seconds per wall second (default 40: about a minute and a half;
 *                    lower is more exact on a busy machine, see simulator/README.md)
 *   --levels 1,8,16,32,64   concurrencies; --output-tokens 2000
 *
 * `npm run demo -- --stack` runs the embedded `sim` stack instead: `pulumi up` under the real engine
 * (provisioning, units, gate, benchmark), then its outputs; `--stack --destroy` tears it down.
 */
import * as os from "node:os";
import * as path from "node:path";
import { parseArgs } from "node:util";
import {
  EMBEDDED_STACK,
  EMBEDDED_STACKS,
  type EngineOptions,
  ensureStack,
  PROJECT_ROOT,
  runPulumi,
  secretsProviderProblem,
} from "./pulumi";
import { rehearseStory } from "./story";
import { fleetTable } from "../components/router/fleet-table";
import type { StackOutputs } from "../components/stack-outputs";

async function stack(destroy: boolean): Promise<number> {
  const name = process.env.GPUHOST_STACK ?? EMBEDDED_STACK;
  const opts: EngineOptions = { embedded: EMBEDDED_STACKS.includes(name) };
  const problem = opts.embedded ? undefined : secretsProviderProblem(name, opts);
  if (problem) {
    process.stderr.write(`gpuhost demo: ${problem}\n`);
    return 2;
  }
  await ensureStack(name, opts);
  const up = await runPulumi([destroy ? "destroy" : "up", "--yes", "--skip-preview", "--stack", name], {
    ...opts,
    onOutput: (chunk) => process.stdout.write(chunk),
  });
  if (up.code !== 0) {
    process.stderr.write(`\npulumi ${destroy ? "destroy" : "up"} on stack ${name} failed (exit ${up.code})\n`);
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

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    strict: true,
    options: {
      stack: { type: "boolean" },
      destroy: { type: "boolean" },
      "time-scale": { type: "string" },
      levels: { type: "string" },
      "output-tokens": { type: "string" },
    },
  });
  if (values.stack || values.destroy) return stack(values.destroy === true);
  const timeScale = Number(values["time-scale"] ?? 40);
  const levels = (values.levels ?? "1,8,16,32,64").split(",").map(Number);
  const outputTokens = Number(values["output-tokens"] ?? 2000);
  if (!(timeScale > 0) || levels.some((l) => !Number.isInteger(l) || l <= 0) || !(outputTokens > 0)) {
    process.stderr.write("demo: --time-scale, --levels and --output-tokens must be positive numbers\n");
    return 2;
  }
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

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${(err as Error)?.stack ?? String(err)}\n`);
    process.exit(2);
  },
);
