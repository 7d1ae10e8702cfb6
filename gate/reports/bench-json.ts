/**
 * `gpuhost bench --json FILE`: the report written piece by piece as it is serialised, never as one
 * string. At 16 M tokens the one string of JSON.stringify was 497-530 MB, 1.3 % under V8's longest
 * string, and the process peaked at 2.1-2.5 GiB holding it beside the samples; here what is held at
 * once is one value's text and a write buffer of WRITE_CHUNK_CHARS.
 *
 * Each request's per-token gaps (RequestSample.itlSeconds, one number per token: most of a large
 * report) are kept as a bounded summary (count, mean, p50, p90, p99, max) unless the caller asks for
 * them all (`--all-gaps`); the report says which under samples.gaps.
 */
import { closeSync, openSync, writeSync } from "node:fs";
import type { BenchResult } from "../run/bench";
import { percentile } from "../judge/stats";
import type { RequestSample } from "../base/samples";

/** Text gathered before one write to the file: large enough that writes are few, small beside the report. */
const WRITE_CHUNK_CHARS = 1 << 20;

/** A request's per-token gaps in a fixed number of figures, host seconds; null figures when it had none. */
export interface GapSummary {
  count: number;
  meanSeconds: number | null;
  p50Seconds: number | null;
  p90Seconds: number | null;
  p99Seconds: number | null;
  maxSeconds: number | null;
}

export function gapSummary(gaps: readonly number[]): GapSummary {
  const sorted = Float64Array.from(gaps).sort();
  const n = sorted.length;
  return {
    count: n,
    meanSeconds: n > 0 ? sorted.reduce((a, v) => a + v, 0) / n : null,
    p50Seconds: percentile(sorted, 50),
    p90Seconds: percentile(sorted, 90),
    p99Seconds: percentile(sorted, 99),
    maxSeconds: n > 0 ? sorted[n - 1] : null,
  };
}

/** A sample as the report holds it: its gaps summarised (itlSummary) in place of the list, unless all are kept. */
function reported(s: RequestSample, allGaps: boolean): unknown {
  if (allGaps) return s;
  const { itlSeconds, ...rest } = s;
  return { ...rest, itlSummary: gapSummary(itlSeconds) };
}

/**
 * VALUE as JSON, in pieces to OUT: objects member by member, arrays element by element and their
 * numbers and strings LEAVES_PER_PIECE at a time (so no piece is larger than that many leaves' text), with JSON.stringify's rules for what has no JSON form (undefined and functions
 * left out of objects and null in arrays, non-finite numbers null). MAP rewrites a value before it is
 * written (the samples' gaps).
 */
export function streamJson(
  value: unknown,
  out: (piece: string) => void,
  map: (v: unknown) => unknown = (v) => v,
): void {
  const v = map(value);
  if (Array.isArray(v)) return streamArray(v, out, map);
  if (v !== null && typeof v === "object" && typeof (v as { toJSON?: unknown }).toJSON !== "function") {
    out("{");
    let first = true;
    for (const [k, x] of Object.entries(v)) {
      if (x === undefined || typeof x === "function") continue;
      out(`${first ? "" : ","}${JSON.stringify(k)}:`);
      first = false;
      streamJson(x, out, map);
    }
    out("}");
    return;
  }
  out(JSON.stringify(v) ?? "null");
}

/** Numbers, strings and the like written this many to a piece: a piece per gap made the writer slower than one string. */
const LEAVES_PER_PIECE = 1024;

const isLeaf = (x: unknown) => x === null || (typeof x !== "object" && typeof x !== "function" && x !== undefined);

/** An array: runs of leaves a slice at a time (JSON.stringify's own text of the slice), anything else element by element, one a line. */
function streamArray(v: unknown[], out: (piece: string) => void, map: (v: unknown) => unknown): void {
  out("[");
  for (let i = 0; i < v.length;) {
    if (i > 0) out(isLeaf(v[i]) && isLeaf(v[i - 1]) ? "," : ",\n");
    let end = i;
    while (end < v.length && end - i < LEAVES_PER_PIECE && isLeaf(v[end]) && isLeaf(map(v[end]))) end++;
    if (end > i) {
      out(JSON.stringify(v.slice(i, end)).slice(1, -1));
      i = end;
      continue;
    }
    const x = v[i++];
    if (x === undefined || typeof x === "function") out("null");
    else streamJson(x, out, map);
  }
  out("]");
}

/** Writes a bench result to FILE as it is serialised (samples with their gaps summarised unless allGaps). */
export function writeBenchJson(file: string, result: BenchResult, opts: { allGaps: boolean }): void {
  const fd = openSync(file, "w");
  try {
    let pending: string[] = [];
    let size = 0;
    const flush = () => {
      if (pending.length > 0) writeSync(fd, pending.join(""));
      pending = [];
      size = 0;
    };
    const out = (piece: string) => {
      pending.push(piece);
      size += piece.length;
      if (size >= WRITE_CHUNK_CHARS) flush();
    };
    const isSample = (v: unknown): v is RequestSample =>
      typeof v === "object" && v !== null && Array.isArray((v as RequestSample).itlSeconds) && "e2eSeconds" in v;
    const { samples, ...summary } = result;
    const report = { ...summary, samples: { gaps: opts.allGaps ? "all" : "summary", ...samples } };
    streamJson(report, out, (v) => (isSample(v) ? reported(v, opts.allGaps) : v));
    out("\n");
    flush();
  } finally {
    closeSync(fd);
  }
}
