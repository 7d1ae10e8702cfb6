/**
 * Issue 27.4 under the real engine: the model's own health as drift, on a throwaway `sim` stack
 * whose active service is speculative (EAGLE3) with a short benchmark. Right after `up`, `gpuhost
 * drift --textfile` is clean: the refresh's freshly measured figures (decode tok/s varies from one
 * read to the next) are no change to the engine. Then faults switched on in the simulated host's
 * running SGLang stand-in (its faults file, GPUHOST_ROOT/run/gpuhost-sim/faults): garbled answers
 * and collapsed acceptance are drift that names the field, in the report and the .prom file. With
 * the faults cleared, `pulumi up` replaces the service's VerifiedGeneration (the gate runs again)
 * and the next drift check is clean. Nothing is mocked.
 */
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { driftMain } from "../../cli/drift";
import { VERIFIED_GENERATION_TYPE } from "../../components/drift/report";
import { type EngineOptions, runPulumi } from "../../engine/pulumi";
import { freeLocalPort } from "../../ports";
import {
  createTestStack,
  SHORT_COMPARISON_BENCHMARK,
  type TestStack,
  disposeStack,
  simulatedRootsOf,
} from "../support/stack";
import { alive } from "../support/processes";
import { simHostRoot } from "../support/sim-stack";

const hostRoot = simHostRoot("health");
// Where the simulated host's units (the SGLang stand-in among them) read their faults while they run.
const faultsFile = path.join(hostRoot, "run", "gpuhost-sim", "faults");
const textDir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-health-textfile-"));
let stack: TestStack | undefined;
/** Wall seconds of each engine step, printed at the end (what the health check adds to a refresh). */
const timings: string[] = [];

/** `gpuhost drift --stack NAME --textfile DIR` in this process: its status, the engine's, the report, the file. */
async function drift(opts: EngineOptions) {
  const name = stack!.stack;
  let engineCode = -1;
  let out = "";
  let events = "";
  const started = Date.now();
  const code = await driftMain(["--stack", name, "--textfile", textDir], {
    out: (t) => void (out += t),
    err: (t) => void (out += t),
    runPulumi: async (args, o) => {
      const r = await runPulumi(args, { ...opts, ...o, env: { ...opts.env, ...o?.env } });
      engineCode = r.code;
      events = r.stdout;
      return r;
    },
  });
  timings.push(`drift ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const file = path.join(textDir, `gpuhost-drift-${name}.prom`);
  const verified = events
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as { resOutputsEvent?: { metadata?: RefreshMetadata } })
    .map((e) => e.resOutputsEvent?.metadata)
    .filter((m): m is RefreshMetadata => m?.type === VERIFIED_GENERATION_TYPE);
  return { code, engineCode, out, verified, text: fs.existsSync(file) ? fs.readFileSync(file, "utf8") : "" };
}

/** A refresh's event for one resource: its operation, and its outputs as stored and as read. */
interface RefreshMetadata {
  op: string;
  type: string;
  old?: { outputs?: Record<string, unknown> };
  new?: { outputs?: Record<string, unknown> };
}

/** Switch the stand-in's faults (it reads the file again at most every 200 ms). */
async function faults(names: string): Promise<void> {
  fs.mkdirSync(path.dirname(faultsFile), { recursive: true });
  fs.writeFileSync(faultsFile, names ? `${names}\n` : "");
  await new Promise((r) => setTimeout(r, 600));
}

/** `pulumi up --json`: the operation on each VerifiedGeneration (e.g. "create-replacement"), and the wall time. */
async function up(...flags: string[]): Promise<string[]> {
  const started = Date.now();
  const r = await stack!.ok("up", "--yes", "--skip-preview", "--json", ...flags);
  timings.push(`${["up", ...flags].join(" ")} ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return r.stdout
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as { resOutputsEvent?: { metadata?: { op: string; type: string } } })
    .map((e) => e.resOutputsEvent?.metadata)
    .filter((m) => m?.type === VERIFIED_GENERATION_TYPE)
    .map((m) => m!.op);
}

beforeAll(async () => {
  stack = await createTestStack(
    "sim",
    [
      { path: "gpuhost:services.port", value: String(await freeLocalPort()) },
      { path: "gpuhost:services.active", value: "eagle3" },
      { path: "gpuhost:hosts[0].connection.root", value: hostRoot },
      { path: "gpuhost:apiKey", value: `sim-health-${randomBytes(16).toString("hex")}`, secret: true },
      ...SHORT_COMPARISON_BENCHMARK,
    ],
    300_000,
  );
}, 120_000);

afterAll(async () => {
  try {
    await disposeStack(stack, hostRoot, textDir);
  } finally {
    process.stdout.write(`[sim-health] ${timings.join("; ")}\n`);
  }
}, 300_000);

describe("the model's own health as drift under the real engine", () => {
  const item = (field: string) => new RegExp(`^gpuhost_drift\\{stack="[^"]+",host="[^"]+",item="${field}"\\} 1$`, "m");

  it("right after up the drift check is clean: the refresh's measured figures are no change", async () => {
    await up();
    const r = await drift(stack!.opts);
    expect(r.engineCode, r.out).toBe(0);
    expect(r.code, r.out).toBe(0);
    // The read's outputs are not the stored ones (the check's fresh figures, absent from the state up
    // wrote), yet the engine reports no change: the refresh asked the provider's diff.
    expect(r.verified.map((m) => m.op)).toEqual(["same"]);
    const [read] = r.verified;
    expect(read.old?.outputs?.healthCheck).toBeUndefined();
    expect(read.new?.outputs?.healthCheck).toMatchObject({ answerMatches: true, findings: [] });
    expect(r.text).toMatch(/^gpuhost_service_answer_matches\{[^}]*\} 1$/m);
    expect(r.text).toMatch(/^gpuhost_service_acceptance_length\{[^}]*\} [1-9][\d.]*$/m);
    expect(r.text).not.toMatch(/^gpuhost_drift\{/m);
  }, 400_000);

  it("garbled answers: exit 1, health.answer named, answer_matches 0", async () => {
    await faults("garbled-answers");
    const r = await drift(stack!.opts);
    expect(r.code, r.out).toBe(1);
    expect(r.out).toContain("health.answer");
    expect(r.text).toMatch(item("health\\.answer"));
    expect(r.text).toMatch(/^gpuhost_service_answer_matches\{[^}]*\} 0$/m);
  }, 200_000);

  it("acceptance collapse: health.acceptanceLength named, the gauge reads 1", async () => {
    await faults("acceptance-collapse");
    const r = await drift(stack!.opts);
    expect(r.code, r.out).toBe(1);
    expect(r.out).toContain("health.acceptanceLength");
    expect(r.text).toMatch(item("health\\.acceptanceLength"));
    expect(r.text).toMatch(/^gpuhost_service_acceptance_length\{[^}]*\} 1$/m);
    expect(r.text).not.toMatch(item("health\\.answer"));
  }, 200_000);

  /**
   * The stack refreshes at every up (Pulumi.yaml), so a fault cleared before the up would be read
   * as healthy again and nothing replaced: the drift is recorded by a refresh while the fault is on,
   * the fault cleared, and the up that follows (no refresh of its own) replaces from the recorded drift.
   */
  it("drift recorded, faults cleared: pulumi up re-gates the service and the next drift check is clean", async () => {
    const started = Date.now();
    await stack!.ok("refresh", "--yes", "--skip-preview");
    timings.push(`refresh ${((Date.now() - started) / 1000).toFixed(1)} s`);
    await faults("");
    const ops = await up("--refresh=false");
    expect(ops).toContain("create-replacement");
    const r = await drift(stack!.opts);
    expect(r.code, r.out).toBe(0);
    expect(r.text).not.toMatch(/^gpuhost_drift\{/m);
  }, 400_000);

  /** A test's teardown does not destroy a simulated stack (test/support/stack.ts): it stops what runs. */
  it("the teardown stops the simulated services without the engine, and removes the stack's folder", async () => {
    const units = path.join(hostRoot, "run", "gpuhost-sim", "systemd");
    const pids = fs
      .readdirSync(units)
      .flatMap((u) => ["supervisor.pid", "main.pid"].map((f) => path.join(units, u, f)))
      .filter((f) => fs.existsSync(f))
      .map((f) => Number(fs.readFileSync(f, "utf8")));
    // The active service and its supervisor at least (inactive units' pid files name ended processes).
    expect(pids.filter(alive).length, pids.join(" ")).toBeGreaterThanOrEqual(2);
    // The path without the engine: the stack's one host, simulated, read from its config file.
    expect(simulatedRootsOf(path.join(stack!.dir, `Pulumi.${stack!.stack}.yaml`))).toEqual([hostRoot]);
    await stack!.dispose();
    const dir = stack!.dir;
    stack = undefined; // disposed: afterAll has only the folders left
    expect(pids.filter(alive)).toEqual([]);
    expect(fs.existsSync(dir)).toBe(false);
  }, 60_000);
});
