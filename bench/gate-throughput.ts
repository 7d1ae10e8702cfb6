/**
 * Throughput accuracy: the benchmark's aggregate output tok/s at concurrency 64 x 4096 tokens,
 * against the simulator's ground truth (GET /sim/truth: the performance model's expected closed-loop
 * aggregate, and its exact count of tokens emitted). Target: error <= 1%.
 *
 *   npx tsx bench/gate-throughput.ts [--profile tiny] [--concurrency 64] [--tokens 4096] [--time-scale 1]
 */
import { parseArgs } from "node:util";
import { bench } from "../gate/index";
import { fetchOnce } from "../gate/transport/http";
import { startSimulator } from "../simulator/index";
import type { ExpectedRun, TheoreticalLevel } from "../simulator/perf-model";

/** GET /sim/truth with concurrency, output_tokens and prompt_tokens: the fields read here (simulator/info.ts). */
interface Truth {
  timeScale: number;
  tokensEmitted: number;
  expected: ExpectedRun;
  theoretical: (TheoreticalLevel & { wallAggregateTokensPerSecond: number })[];
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      profile: { type: "string", default: "tiny" },
      concurrency: { type: "string", default: "64" },
      tokens: { type: "string", default: "4096" },
      "time-scale": { type: "string", default: "1" },
      "requests-per-concurrency": { type: "string", default: "2" },
    },
  });
  const concurrency = Number(values.concurrency);
  const tokens = Number(values.tokens);
  const sim = await startSimulator({
    profile: values.profile,
    port: 0,
    timeScale: Number(values["time-scale"]),
    log: () => undefined,
    onExit: () => undefined,
  });
  try {
    await waitReady(sim.url);
    const before = await truth(sim.url, concurrency, tokens);
    const result = await bench(
      { url: sim.url },
      {
        singleRequestMaxTokens: [],
        concurrency: [concurrency],
        sweepMaxTokens: tokens,
        requestsPerConcurrency: Number(values["requests-per-concurrency"]),
      },
    );
    const after = await truth(sim.url, concurrency, tokens);
    const level = result.sweep[0];
    const expected = after.expected.aggregateOutputTokensPerSecond * after.timeScale;
    const emitted = after.tokensEmitted - before.tokensEmitted;
    const error = (level.outputTokensPerSecond - expected) / expected;
    const out = {
      profile: values.profile,
      concurrency,
      maxTokens: tokens,
      requests: level.requests,
      errors: level.errors,
      measuredOutputTokensPerSecond: level.outputTokensPerSecond,
      truthExpectedOutputTokensPerSecond: expected,
      truthSteadyStateOutputTokensPerSecond:
        after.theoretical.find((t) => t.concurrency === concurrency)?.wallAggregateTokensPerSecond ?? null,
      relativeError: error,
      tokensCountedFromUsage: level.completionTokens,
      tokensEmittedBySimulator: emitted,
      ttftP50Seconds: level.ttftP50Seconds,
      durationSeconds: level.durationSeconds,
    };
    console.log(JSON.stringify(out, null, 2));
    console.log(`throughput error vs ground truth: ${(error * 100).toFixed(3)}% (target <= 1%)`);
  } finally {
    await sim.close();
  }
}

async function truth(url: string, concurrency: number, tokens: number): Promise<Truth> {
  const prompt = 20; // about the benchmark prompts' length; prefill is negligible beside 4096 decode steps
  const query = `concurrency=${concurrency}&output_tokens=${tokens}&prompt_tokens=${prompt}`;
  return JSON.parse((await fetchOnce(`${url}/sim/truth?${query}`, { timeoutMs: 10_000 })).text) as Truth;
}

async function waitReady(url: string): Promise<void> {
  for (;;) {
    try {
      const t = JSON.parse((await fetchOnce(`${url}/sim/truth`, { timeoutMs: 10_000 })).text) as { status?: string };
      if (t.status === "ready") return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
