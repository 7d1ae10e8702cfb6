/**
 * Issue 44.6: `gpuhost bench --json` writes its report as it serialises it (gate/reports/bench-json.ts),
 * never as one string, with each request's per-token gaps as a bounded summary unless --all-gaps.
 * The serialiser is held to JSON.stringify's own output; the CLI runs against a small server written
 * in the tests. Its memory on a large run is measured by bench/bench-json-memory.ts, not asserted here.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { benchMain } from "../../cli/bench";
import { gapSummary, streamJson } from "../../gate/reports/bench-json";
import { io } from "./cli-fixture";
import { loadServer, type LoadServer } from "./load-servers";

let server: LoadServer | undefined;
afterAll(async () => server?.close());

const streamed = (v: unknown) => {
  const pieces: string[] = [];
  streamJson(v, (p) => pieces.push(p));
  return { text: pieces.join(""), longest: pieces.reduce((m, p) => Math.max(m, p.length), 0) };
};

describe("the streamed report", () => {
  it("reads back as JSON.stringify's would: what has no JSON form left out or null, strings escaped", () => {
    const value = {
      a: 1,
      gone: undefined,
      fn: () => 1,
      nan: NaN,
      inf: -Infinity,
      text: 'quote " backslash \\ newline \n é \u2028',
      list: [1, undefined, null, { x: [true, false] }, () => 2],
      nested: { empty: {}, none: [], date: new Date(0) },
    };
    expect(JSON.parse(streamed(value).text)).toEqual(JSON.parse(JSON.stringify(value)));
  });

  it("is written in bounded pieces: a million gaps never become one string", () => {
    const gaps = Array.from({ length: 1_000_000 }, (_, i) => (i % 7) * 0.001);
    const { text, longest } = streamed({ samples: [{ itlSeconds: gaps }] });
    // 1,024 numbers of at most 20 characters and their commas.
    expect(longest).toBeLessThan(1024 * 21);
    expect((JSON.parse(text) as { samples: { itlSeconds: number[] }[] }).samples[0].itlSeconds).toHaveLength(1_000_000);
  });

  it("a request's gaps summarised: count, mean, percentiles, max", () => {
    const g = gapSummary([0.04, 0.01, 0.02, 0.03]);
    expect(g.p90Seconds).toBeCloseTo(0.037, 9);
    expect(g.p99Seconds).toBeCloseTo(0.0397, 9);
    expect({ ...g, p90Seconds: 0, p99Seconds: 0 }).toEqual({
      count: 4,
      meanSeconds: 0.025,
      p50Seconds: 0.025,
      p90Seconds: 0,
      p99Seconds: 0,
      maxSeconds: 0.04,
    });
    expect(gapSummary([])).toEqual({
      count: 0,
      meanSeconds: null,
      p50Seconds: null,
      p90Seconds: null,
      p99Seconds: null,
      maxSeconds: null,
    });
  });
});

describe("gpuhost bench --json", () => {
  const run = async (...extra: string[]) => {
    server ??= await loadServer();
    const file = path.join(mkdtempSync(path.join(tmpdir(), "gpuhost-bench-json-")), "b.json");
    const argv = ["--endpoint", server.url, "--model", "m", "--max-tokens", "8", "--prompts", "1"];
    const code = await benchMain(
      [...argv, "--concurrency", "2", "--requests-per-concurrency", "2", "--json", file, ...extra],
      io(),
    );
    expect(code).toBe(0);
    return JSON.parse(readFileSync(file, "utf8")) as {
      sweep: { requests: number }[];
      samples: { gaps: string; sweep: { requests: Record<string, unknown>[] }[] };
    };
  };

  it("keeps each request's gaps as a summary by default, and every gap with --all-gaps", async () => {
    const summarised = await run();
    expect(summarised.samples.gaps).toBe("summary");
    const first = summarised.samples.sweep[0].requests[0];
    expect(first.itlSeconds).toBeUndefined();
    expect(typeof (first.itlSummary as { count: unknown }).count).toBe("number");
    expect(summarised.samples.sweep[0].requests).toHaveLength(summarised.sweep[0].requests);

    const all = await run("--all-gaps");
    expect(all.samples.gaps).toBe("all");
    const req = all.samples.sweep[0].requests[0];
    expect(Array.isArray(req.itlSeconds)).toBe(true);
    expect(req.itlSummary).toBeUndefined();
  }, 60_000);
});
