/**
 * Truncated completions and answerless output (issue 18.3 and 18.8), against small servers written
 * in the tests (test/gate/load-servers.ts): one whose context limit cuts every benchmark request
 * short (finish_reason length before max_tokens), one whose benchmark requests only reason and never
 * answer while its probes do (the gate passes, the benchmark must not publish capacity).
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { benchMain } from "../../cli/bench";
import { bench } from "../../gate/index";
import type { BenchResult } from "../../gate/run/bench";
import { io, createVerification } from "./cli-fixture";
import { loadServersClosedAfterEach } from "./load-servers";

const start = loadServersClosedAfterEach();
const argv = (url: string, file: string) => [
  ...["--endpoint", url, "--model", "m", "--concurrency", "2", "--requests-per-concurrency", "2"],
  ...["--max-tokens", "8", "--prompts", "1", "--json", file],
];
const jsonFile = () => path.join(mkdtempSync(path.join(tmpdir(), "gpuhost-trunc-")), "b.json");

describe("truncated completions are counted, shown, and planned from the tokens produced", () => {
  it("every request stopped at 5 of 8 tokens: counted per level and single run, the table says so, tokens are 5 each", async () => {
    const server = await start({ truncateAt: 5 });
    const file = jsonFile();
    const o = io();
    expect(await benchMain(argv(server.url, file), o)).toBe(0);
    const json = JSON.parse(readFileSync(file, "utf8")) as BenchResult;
    expect(json.sweep[0]).toMatchObject({ requests: 4, errors: 0, truncatedRequests: 4, completionTokens: 20 });
    expect(json.singleRequest[0]).toMatchObject({ truncatedRequests: 1, completionTokens: 5 });
    expect(o.out()).toMatch(/^2\s.*\(4 cut short\) {2}certified$/m);
    expect(o.out()).toContain(
      "note: C=2: 4/4 request(s) cut short before max_tokens 8 (finish_reason length: the context limit), 5 tokens per request on average",
    );
    // The sustained figure is the tokens produced over the time: 20 tokens, not 4 x 8.
    const level = json.sweep[0];
    expect(level.outputTokensPerSecond).toBeCloseTo(20 / level.durationSeconds, 6);
  }, 30_000);

  it("requests that got their full length are not counted as cut short", async () => {
    const server = await start({ tokens: 8 });
    const r = await bench(
      { url: server.url, model: "m" },
      { concurrency: [2], requestsPerConcurrency: 1, singleRequestMaxTokens: [], sweepMaxTokens: 8 },
    );
    expect(r.sweep[0].truncatedRequests).toBe(0);
  }, 30_000);
});

describe("answerless output is never capacity", () => {
  it("bench: a level whose every request only reasoned is excluded; nothing sustained; exit 1 (nothing measured)", async () => {
    const server = await start({ reasoningOnly: true });
    const file = jsonFile();
    const o = io();
    expect(await benchMain(argv(server.url, file), o)).toBe(1);
    const json = JSON.parse(readFileSync(file, "utf8")) as BenchResult;
    expect(json.sweep[0]).toMatchObject({ requests: 4, errors: 0, answerlessRequests: 4 });
    expect(json.sustainedOutputTokensPerSecond).toBe(0);
    expect(json.saturationVerdict).toMatch(/^no level produced a visible answer within the error budget of 1 %/);
    expect(json.saturationVerdict).toContain("C=2 produced no visible answer");
    expect(o.out()).toMatch(/^2\s.*\(no visible answer\) {2}certified$/m);
    expect(o.out()).not.toMatch(/sustained \d/);
  }, 30_000);

  it("VerifiedGeneration: the gate passes (the probes answer), the benchmark's answerless levels publish nothing", async () => {
    const server = await start({ reasoningOnly: true });
    await expect(
      createVerification(
        server.url,
        { concurrency: [2, 4], requestsPerConcurrency: 1, singleRequestMaxTokens: [], sweepMaxTokens: 4 },
        20,
      ),
    ).rejects.toThrow(/measured no throughput after the gate passed .*C=2, C=4 produced no visible answer/);
  }, 30_000);
});
