/**
 * The story's last step on a fleet, under the real engine and the real SMG (PyPI smg, hash-locked):
 * a throwaway copy of stacks/Pulumi.sim-fleet.yaml cut to two simulated hosts (free ports, a secret
 * API key) is brought up by `pulumi up`; then `gpuhost job --stack <it>` (dist/, as its own process,
 * its outputs read by the real `pulumi stack output`) runs a batch file through the fleet's router at
 * the fleet's measured knee with the stack's own API key (its secret config; no GPUHOST_API_KEY), is
 * killed with SIGKILL half-way, and the same command is run again: it
 * continues, every custom_id is recorded exactly once, SMG sent requests to both workers, and the
 * summary compares the job with the fleet's certified tok/s and says whether the deadline holds.
 * Nothing is mocked.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readRequestCounts } from "../../components/fleet-verification/router-api";
import { PROJECT_ROOT } from "../../engine/pulumi";
import { freeLocalPort as freePort } from "../../ports";
import { createTestStack, type TestStack, upChanges } from "../support/stack";
import { smgVenv } from "../support/smg";

const simHosts = path.join(PROJECT_ROOT, ".gpuhost", "sim-hosts");
fs.mkdirSync(simHosts, { recursive: true });
const base = fs.mkdtempSync(path.join(simHosts, "fleet-job-"));
const roots = [1, 2].map((i) => path.join(base, `h${i}`));
const apiKey = `sim-fleet-job-${randomBytes(16).toString("hex")}`;
const N = 400;
let stack: TestStack | undefined;
let metricsUrl = "";
const children = new Set<ChildProcess>();

beforeAll(async () => {
  smgVenv();
  const ports = [await freePort(), await freePort(), await freePort(), await freePort()];
  metricsUrl = `http://127.0.0.1:${ports[3]}/metrics`;
  stack = await createTestStack(
    "sim-fleet",
    [
      ...roots.flatMap((root, i) => [
        { path: `gpuhost:hosts[${i}].connection.root`, value: root },
        { path: `gpuhost:hosts[${i}].port`, value: String(ports[i]) },
      ]),
      { path: "gpuhost:router.port", value: String(ports[2]) },
      { path: "gpuhost:router.prometheusPort", value: String(ports[3]) },
      // A short benchmark: this file tests the job on the fleet's outputs, not the fleet's figures
      // (sim-fleet.test.ts does); on two shared cores the certificates are reported, not required.
      { path: "gpuhost:benchmark.concurrency[0]", value: "2" },
      { path: "gpuhost:benchmark.concurrency[1]", value: "4" },
      { path: "gpuhost:benchmark.sweepMaxTokens", value: "256" },
      { path: "gpuhost:benchmark.singleRequestMaxTokens[0]", value: "128" },
      { path: "gpuhost:benchmark.certification.require", value: "false", type: "bool" },
      { path: "gpuhost:apiKey", value: apiKey, secret: true },
    ],
    600_000,
  );
  await stack.ok("config", "rm", "--path", "gpuhost:hosts[2]");
  await stack.ok("config", "rm", "--path", "gpuhost:benchmark.concurrency[2]");
}, 600_000);

afterAll(async () => {
  for (const c of children) c.kill("SIGKILL");
  try {
    await stack?.dispose();
  } finally {
    fs.rmSync(base, { recursive: true, force: true });
  }
}, 600_000);

/** N chat requests for the fleet's served model, each prompt its own (no shared prefix for SMG to route by). */
function writeInput(file: string, model: string): void {
  const lines = Array.from({ length: N }, (_, i) =>
    JSON.stringify({
      custom_id: `fleet-${i}`,
      method: "POST",
      url: "/v1/chat/completions",
      body: { model, messages: [{ role: "user", content: `${i}: ${randomBytes(8).toString("hex")}` }], max_tokens: 32 },
    }),
  );
  fs.writeFileSync(file, `${lines.join("\n")}\n`);
}

const lineCount = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").length - 1 : 0);

/**
 * `gpuhost job --stack <the test stack> ARGS` as its own process: dist/cli/job.js's jobMain with the
 * real CLI's signal handling, the engine on the test stack's backend and passphrase (as drift's tests
 * run it); killed with SIGKILL once the output holds KILL_AT lines.
 */
function job(args: string[], killAt?: number) {
  const opts = stack!.opts;
  const driver = `
    const { jobMain } = require(${JSON.stringify(path.join(PROJECT_ROOT, "dist", "cli", "job.js"))});
    const { runPulumi } = require(${JSON.stringify(path.join(PROJECT_ROOT, "dist", "engine", "pulumi.js"))});
    const opts = JSON.parse(process.env.GPUHOST_TEST_ENGINE_OPTS);
    jobMain(process.argv.slice(1), undefined, {
      runPulumi: (args, o) => runPulumi(args, { ...opts, ...o, env: { ...opts.env, ...o?.env } }),
    }).then((code) => process.exit(code));`;
  // No GPUHOST_API_KEY: the key is the stack's own secret, read through the engine.
  const env: NodeJS.ProcessEnv = { ...process.env, GPUHOST_TEST_ENGINE_OPTS: JSON.stringify(opts) };
  delete env.GPUHOST_API_KEY;
  const child = spawn(process.execPath, ["-e", driver, "--", "--stack", stack!.stack, ...args], {
    cwd: PROJECT_ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(child);
  let out = "";
  let err = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (err += d));
  const output = args[args.indexOf("--output") + 1];
  const poll =
    killAt === undefined
      ? undefined
      : setInterval(() => {
          if (lineCount(output) >= killAt) child.kill("SIGKILL");
        }, 5);
  return new Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string; err: string }>((resolve) =>
    child.on("exit", (code, signal) => {
      clearInterval(poll);
      children.delete(child);
      resolve({ code, signal, out, err });
    }),
  );
}

describe("gpuhost job --stack on a sim-fleet stack, through the real SMG, under the real engine", () => {
  it("aims at the fleet's router at its knee, is killed half-way, continues, and records every custom_id once", async () => {
    await upChanges(stack!);
    const fleet = (await stack!.outputs()).fleet!;
    expect(fleet.registered).toHaveLength(2);
    const knee = fleet.saturationConcurrency ?? Math.max(...fleet.sweep.map((l) => l.concurrency ?? 0));
    const dir = fs.mkdtempSync(path.join(base, "job-"));
    const input = path.join(dir, "in.jsonl");
    const output = path.join(dir, "out.jsonl");
    writeInput(input, "tiny");
    const deadline = new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10);
    const args = ["--input", input, "--output", output, "--deadline", deadline, "--progress-every", "1"];
    const before = await readRequestCounts(metricsUrl);

    const killed = await job(args, N / 2);
    expect(killed.signal, killed.err).toBe("SIGKILL");
    expect(killed.err).toContain(
      `${N} requests, 0 already recorded, ${knee} at a time against ${fleet.routerEndpoint}`,
    );
    const kept = lineCount(output);
    expect(kept).toBeGreaterThanOrEqual(N / 2);
    expect(kept).toBeLessThan(N);

    const again = await job(args);
    expect(again.code, again.err).toBe(0);
    expect(again.err).toMatch(new RegExp(`${N} requests, (\\d+) already recorded, ${knee} at a time`));
    expect(again.out).toContain("against the fleet's router (2 hosts of autoregressive)");
    expect(again.out).toMatch(/throughput: [\d,]+ tok\/s over the last minutes; (on plan|\d+ % (below|above) the)/);
    expect(again.out).toMatch(/deadline: makes the deadline/);
    expect(again.out).toMatch(
      new RegExp(`recorded: ${N} of ${N} \\(${N} succeeded, 0 failed; \\d+ by earlier runs\\)`),
    );

    const counts = new Map<string, number>();
    for (const file of [output, path.join(dir, "out.errors.jsonl")])
      for (const l of fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter(Boolean) : []) {
        const id = (JSON.parse(l) as { custom_id: string }).custom_id;
        counts.set(id, (counts.get(id) ?? 0) + 1);
      }
    expect(counts.size).toBe(N);
    expect([...counts].filter(([, c]) => c !== 1)).toEqual([]);
    expect(lineCount(path.join(dir, "out.errors.jsonl"))).toBe(0);
    // SMG's own count: it sent the job's requests to both workers.
    const after = await readRequestCounts(metricsUrl);
    for (const w of fleet.registered) expect(after[w.url] ?? 0, w.url).toBeGreaterThan(before[w.url] ?? 0);
  }, 1_500_000);
});
