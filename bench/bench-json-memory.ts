/**
 * Issue 44.6, measured: the peak memory of writing `gpuhost bench --json` for a large run, the old
 * way (one JSON.stringify string of the whole report, indent 1, then one write) against the streamed
 * writer (gate/reports/bench-json.ts), with every per-token gap and with their summary. Each way runs
 * in a child process of its own, which builds the same report (TOKENS output tokens as requests of
 * 256 tokens, each with its 255 gaps, as a sweep's samples hold them) and then writes it; the child
 * reports its peak resident set (process.resourceUsage().maxRSS), the peak before the write (the
 * report alone), the file's size and the write's time. The report is built here, not measured from a
 * server: the writer is what is measured, and a 16 M token run takes a real server hours.
 *
 *   npm run tsx -- bench/bench-json-memory.ts [--tokens 16000000]
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { parseArgs } from "node:util";
import type { BenchResult } from "../gate/run/bench";
import type { RequestSample } from "../gate/base/samples";
import { writeBenchJson } from "../gate/reports/bench-json";

const TOKENS_PER_REQUEST = 256;
const WAYS = ["one-string", "streamed-all-gaps", "streamed-summary"] as const;
type Way = (typeof WAYS)[number];

function sample(i: number): RequestSample {
  return {
    maxTokens: TOKENS_PER_REQUEST,
    startedAtSeconds: i * 0.01,
    ttftSeconds: 0.05,
    ttfaSeconds: 0.05,
    itlSeconds: Array.from({ length: TOKENS_PER_REQUEST - 1 }, (_, k) => 0.01 + ((i + k) % 13) * 0.0001),
    e2eSeconds: 2.6,
    completionTokens: TOKENS_PER_REQUEST,
    promptTokens: 40,
    reasoningTokens: null,
    finishReason: "length",
    outputChunks: TOKENS_PER_REQUEST,
    outputCharacters: TOKENS_PER_REQUEST * 4,
    reasoningChunks: 0,
    answerChunks: TOKENS_PER_REQUEST,
    error: null,
    servedModel: "m",
  };
}

/** A result whose samples hold TOKENS output tokens, over eight levels. */
function bigResult(tokens: number): BenchResult {
  const requests = Math.ceil(tokens / TOKENS_PER_REQUEST);
  const per = Math.ceil(requests / 8);
  const sweep = Array.from({ length: 8 }, (_, l) => ({
    mode: "closed" as const,
    concurrency: 2 ** l,
    startedAtSeconds: 0,
    finishedAtSeconds: 100,
    acceptanceLength: null,
    requests: Array.from({ length: Math.min(per, requests - l * per) }, (_, i) => sample(l * per + i)),
  }));
  // The summary's fields do not matter to the writer's memory: the samples are the report's bulk.
  return { model: "m", sweep: [], samples: { warmup: null, singleRequest: [], sweep } } as unknown as BenchResult;
}

function child(way: Way, tokens: number, file: string): void {
  const result = bigResult(tokens);
  const builtKb = process.resourceUsage().maxRSS;
  const started = performance.now();
  if (way === "one-string") writeFileSync(file, JSON.stringify(result, null, 1) + "\n");
  else writeBenchJson(file, result, { allGaps: way === "streamed-all-gaps" });
  const seconds = (performance.now() - started) / 1000;
  const peakKb = process.resourceUsage().maxRSS;
  process.stdout.write(JSON.stringify({ builtKb, peakKb, seconds, bytes: statSync(file).size }));
}

function main(): void {
  const { values } = parseArgs({
    options: { tokens: { type: "string", default: "16000000" }, child: { type: "string" }, file: { type: "string" } },
  });
  const tokens = Number(values.tokens);
  if (values.child) return child(values.child as Way, tokens, values.file!);
  const dir = mkdtempSync(path.join(tmpdir(), "gpuhost-json-memory-"));
  const mib = (kb: number) => `${(kb / 1024).toFixed(0)} MiB`;
  try {
    console.log(`bench --json of ${tokens.toLocaleString("en-US")} output tokens (${TOKENS_PER_REQUEST} per request):`);
    for (const way of WAYS) {
      const file = path.join(dir, `${way}.json`);
      try {
        const out = execFileSync(
          process.execPath,
          [...process.execArgv, __filename, "--child", way, "--tokens", String(tokens), "--file", file],
          { encoding: "utf8", maxBuffer: 1 << 20, stdio: ["ignore", "pipe", "pipe"] },
        );
        const r = JSON.parse(out) as { builtKb: number; peakKb: number; seconds: number; bytes: number };
        console.log(
          `  ${way.padEnd(18)} peak RSS ${mib(r.peakKb)} (the report alone ${mib(r.builtKb)}), ${(r.bytes / 1e6).toFixed(0)} MB written in ${r.seconds.toFixed(1)} s`,
        );
      } catch (e) {
        const why = String((e as { stderr?: string }).stderr ?? e)
          .split("\n")
          .find((l) => /Error|error/.test(l));
        console.log(`  ${way.padEnd(18)} failed: ${why ?? "see stderr"}`);
      }
      rmSync(file, { force: true });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main();
