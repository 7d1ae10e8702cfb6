/**
 * `npm run demo`: the story (docs/story.md), rehearsed on a simulated host (cli/demo-story.ts), or
 * with --stack the embedded `sim` stack under the real engine. `npm run demo -- --help` lists the
 * options (the table below).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import {
  deadLocks,
  deadLockWarning,
  EMBEDDED_STACK,
  type EngineOptions,
  ensureStack,
  pendingOperations,
  pendingOperationsWarning,
  PROJECT_ROOT,
  runPulumi,
  stackAccess,
  STOP_GRACE_MS,
} from "../engine/pulumi";
import { MAX_TOKENS_BOUND } from "./bench";
import { defaultIo, EXIT, runCommand } from "./common";
import { rehearseJob } from "./demo-job";
import { rehearseStory, STORY_PROFILES, type StoryProfile } from "./demo-story";
import { driftMain } from "./drift";
import { textfileName } from "../components/drift/metrics";
import { driftCheckUnitNames } from "../components/drift-check/render";
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
    profile: {
      type: "string",
      choices: Object.keys(STORY_PROFILES),
      description:
        "the story host's simulator profile: the seeds' afternoon, or published (calibrated from a published benchmark of Kimi K2.6 on 8x RTX PRO 6000, rehearsed after the seeds' so both recommendations show side by side)",
      default: "seeds",
    },
    "output-tokens": { type: "integer", max: MAX_TOKENS_BOUND, description: "tokens per completion", default: 2000 },
    job: {
      type: "boolean",
      description:
        "rehearse the job itself: gpuhost job on the simulated story host, killed half-way and run again, against the certified figure (cli/demo-job.ts)",
    },
    "job-requests": { type: "integer", description: "with --job: requests in the job's input", default: 2000 },
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
  const ops = await pendingOperations(name, opts).catch(() => []);
  const warning = pendingOperationsWarning(name, ops, deadLocks(name, opts));
  if (warning) process.stderr.write(`warning: ${warning}\n`);
}

async function stack(destroy: boolean, signal: AbortSignal, engine: EngineOptions): Promise<number> {
  const name = process.env.GPUHOST_STACK || EMBEDDED_STACK;
  // The same backend and secrets as every other command on this stack (engine/pulumi.ts stackAccess).
  const access = await stackAccess(name, { ...engine, signal });
  if (access.problem) {
    process.stderr.write(`gpuhost demo: ${access.problem}\n`);
    return 2;
  }
  const opts = access.opts;
  await ensureStack(name, opts);
  // A lock a killed run left (SIGKILL of this demo mid-sweep) fails the engine at once, and the
  // refresh its pending operations call for fails on it too: say so, and what removes it, first.
  const stale = deadLockWarning(name, deadLocks(name, opts));
  if (stale) {
    process.stderr.write(`gpuhost demo: ${stale}\n`);
    await warnPending(name, opts);
    return EXIT.failed;
  }
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
  if (out.code === 0) await driftCheckOnce(name, opts, signal);
  return out.code;
}

/**
 * One drift check as the scheduled one runs it (`gpuhost drift --textfile`, into a folder of its
 * own), its gpuhost_drift metrics, and where the stack put the timer that runs it every hour.
 */
async function driftCheckOnce(name: string, opts: EngineOptions, signal: AbortSignal): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-demo-drift-"));
  try {
    process.stdout.write(`\nOne drift check (gpuhost drift --stack ${name} --textfile ${dir}):\n`);
    const code = await driftMain(["--stack", name, "--textfile", dir], {
      out: () => undefined,
      err: (t) => process.stderr.write(t),
      // The backend and secrets this demo already chose for the stack (stackAccess above).
      stackAccess: (stack) => Promise.resolve({ stack, embedded: false, opts: {}, problem: undefined }),
      runPulumi: (args, o) => runPulumi(args, { ...o, ...opts, env: { ...o?.env, ...opts.env }, signal }),
    });
    const file = path.join(dir, textfileName(name));
    const metrics = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : "";
    const lines = metrics.split("\n").filter((l) => /^gpuhost_drift(_items|_check_success)?\{/.test(l));
    process.stdout.write(`${lines.map((l) => `  ${l}`).join("\n") || "  (no metrics written)"}\n  exit ${code}\n`);
    process.stdout.write(
      `Scheduled: config operations.driftCheck renders ${driftCheckUnitNames(name).timer} (hourly) into /etc/systemd/system on the machine it names; the sim stack into its simulated host's folder (.gpuhost/sim-hosts/sim-1/etc/systemd/system/, where no timer fires).\n`,
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** ENGINE: options for every engine run (tests: a fixture project on its own backend). */
export function demoMain(argv: string[], engine: EngineOptions = {}): Promise<number> {
  return runCommand(
    DEMO,
    argv,
    defaultIo(),
    async (values, signal) => {
      if (values.stack || values.destroy) return stack(values.destroy === true, signal, engine);
      if (values.job)
        return rehearseJob({
          timeScale: values["time-scale"],
          requests: values["job-requests"],
          outputTokens: values["output-tokens"],
          concurrency: Math.max(...values.levels),
          outDir: path.join(PROJECT_ROOT, ".gpuhost", "demo"),
          say: (line) => process.stdout.write(`${line}\n`),
        });
      return story(values["time-scale"], values.levels, values["output-tokens"], values.profile as StoryProfile);
    },
    { interruptGraceMs: STOP_GRACE_MS + 3000 },
  );
}

async function story(
  timeScale: number,
  levels: number[],
  outputTokens: number,
  profile: StoryProfile,
): Promise<number> {
  const started = Date.now();
  const rehearse = (which: StoryProfile) =>
    rehearseStory({
      projectRoot: PROJECT_ROOT,
      profile: which,
      timeScale,
      levels,
      outputTokens,
      outDir: path.join(PROJECT_ROOT, ".gpuhost", "demo"),
      say: (line) => process.stdout.write(`${line}\n`),
    });
  // The published profile is shown beside the seeds': the same workload and levels on both.
  const order: StoryProfile[] = profile === "seeds" ? ["seeds"] : ["seeds", profile];
  const results: [StoryProfile, Awaited<ReturnType<typeof rehearseStory>>][] = [];
  for (const which of order) {
    if (results.length > 0) process.stdout.write("\n");
    results.push([which, await rehearse(which)]);
  }
  if (results.length > 1) {
    process.stdout.write("\nThe recommendation by profile (the same workload and levels on each):\n");
    for (const [which, r] of results)
      process.stdout.write(`  ${which} (${STORY_PROFILES[which]}): ${r.comparison?.sentence ?? "no comparison"}\n`);
  }
  process.stdout.write(`(rehearsed in ${((Date.now() - started) / 1000).toFixed(0)} s of wall time)\n`);
  process.stdout.write(
    "A fleet of three simulated hosts behind SGLang's router (SMG, from PyPI), verified and measured through it: GPUHOST_STACK=sim-fleet npm run demo -- --stack\n",
  );
  process.stdout.write(
    "A whole drift check under the engine (the toolkit's files and packages, the units, the model's health) with its metrics: npm run demo -- --stack.\n",
  );
  // Figures are wall-clock measurements scaled up: a process kept waiting for a CPU reads slow by
  // the wait times the scale. Say so when the machine was that busy.
  const load = os.loadavg()[0];
  const cores = os.cpus().length;
  if (load > 1.5 * cores)
    process.stdout.write(
      `Note: this machine was busy (load ${load.toFixed(1)} on ${cores} cores); at time scale ${timeScale} every scheduling delay is multiplied by ${timeScale}, so the figures may read low. A lower --time-scale is more exact.\n`,
    );
  return results.every(([, r]) => r.comparison) ? 0 : 1;
}

if (require.main === module) void demoMain(process.argv.slice(2)).then((code) => process.exit(code));
