/**
 * A server that died mid-run is reported as gone, not as a healthy curve (issue 18.2): against a
 * small server written in the tests (test/gate/load-servers.ts) that is killed during the C=2 level
 * (its connections cut, its port then refusing), the run stops there, says so in the verdict and the
 * JSON (complete: false, the reason), publishes no sustained figure, VerifiedGeneration fails with
 * the reason, and the comparison leaves the service out.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { benchMain } from "../../cli/bench";
import { compareMain } from "../../cli/compare";
import { bench } from "../../gate/index";
import type { BenchResult } from "../../gate/run/bench";
import { io, createVerification } from "./cli-fixture";
import { loadServer, type LoadServer } from "./load-servers";

const servers: LoadServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});
/** C=1 runs 4 requests; the server dies at the 7th, two into C=2. */
const dying = async () => {
  const s = await loadServer({ dieAfter: 6, tokens: 4, chunkMs: 5 });
  servers.push(s);
  return s;
};
const plan = {
  concurrency: [1, 2, 4] as [number, ...number[]],
  requestsPerConcurrency: 4,
  singleRequestMaxTokens: [],
  sweepMaxTokens: 4,
};
const GONE =
  /^the server went away during C=2: a request failed \(.*\) and http:\/\/127\.0\.0\.1:\d+ now refuses connections/;

describe("the server went away mid-run", () => {
  it("bench(): the run stops in the level the server died in; complete false with the reason; no sustained figure", async () => {
    const server = await dying();
    const r = await bench({ url: server.url, model: "m" }, plan);
    expect(r.sweep.map((l) => l.level)).toEqual([1, 2]); // C=4 never ran against a closed port
    expect(r.sweep[0].errors).toBe(0);
    expect(r.sweep[1].errors).toBeGreaterThan(0);
    expect(r.complete).toBe(false);
    expect(r.serverGone).toMatch(GONE);
    expect(r.stopReason).toBe(r.serverGone);
    expect(r).toMatchObject({ sustainedOutputTokensPerSecond: 0, saturated: false, saturationConcurrency: null });
    expect(r.saturationVerdict).toMatch(/no figure is published from a run the server did not survive$/);
  }, 30_000);

  it("gpuhost bench: the table and the JSON say so (complete: false, the reason); the exit is not 0", async () => {
    const server = await dying();
    const file = path.join(mkdtempSync(path.join(tmpdir(), "gpuhost-gone-")), "b.json");
    const o = io();
    const code = await benchMain(
      [
        ...["--endpoint", server.url, "--model", "m", "--concurrency", "1,2,4", "--requests-per-concurrency", "4"],
        ...["--max-tokens", "4", "--prompts", "1", "--json", file],
      ],
      o,
    );
    expect(code).not.toBe(0);
    const json = JSON.parse(readFileSync(file, "utf8")) as BenchResult;
    expect(json.complete).toBe(false);
    expect(json.stopReason).toMatch(/the server went away during C=2/);
    expect(json.sustainedOutputTokensPerSecond).toBe(0);
    expect(o.out()).toMatch(/^stopped: the server went away during C=2/m);
    expect(o.out()).not.toMatch(/sustained \d/);
  }, 30_000);

  it("VerifiedGeneration's create fails with the reason, publishing nothing", async () => {
    const server = await dying();
    await expect(createVerification(server.url, plan, 20)).rejects.toThrow(
      /the benchmark stopped: the server went away during C=2: .*no throughput or capacity plan is published/,
    );
  }, 30_000);

  it("gpuhost compare: the service whose server died is left out with the reason", async () => {
    const server = await dying();
    const o = io();
    const code = await compareMain(
      [
        ...["--endpoint", server.url, "--model", "m", "--services", "autoregressive", "--activate-command", "true"],
        ...["--answers", "none"], // this server answers filler: the subject is the server going away
        ...["--concurrency", "1,2,4", "--requests-per-concurrency", "4", "--repeats", "1", "--max-tokens", "4"],
        ...["--cache", path.join(mkdtempSync(path.join(tmpdir(), "gpuhost-gone-")), "cache.json")],
      ],
      o,
    );
    expect(code).toBe(1);
    expect(o.out()).toMatch(/left out: the server went away during C=2/);
    expect(o.out()).toContain("No service could be measured");
  }, 30_000);
});
