/**
 * The knobs of the readiness gate, the benchmark and the capacity plan: the single source of their
 * defaults and documentation. stack/config.ts composes these into the stack-config schema, and
 * the CLI and the VerifiedGeneration provider parse with them, so a default lives here only.
 */
import { z } from "zod";
import { PromptMixSchema, WorkloadShapeSchema } from "./workload";
import { MAX_TIMER_MS, MAX_TIMER_SECONDS } from "../transport/timers";
import { readAnswerSet } from "./answer-set";

/**
 * Wall-clock streamed tokens per second that "auto" gives one thread: a sixth of the most one
 * thread parsed on a core of the 2-core CI machine (about 600,000, with its event loop standing
 * still most of the level) and under half of an earlier, loaded measurement (239,532). Chosen, not
 * measured as the point where timing holds: the level's client check is the proof either way.
 */
export const CLIENT_THREAD_TOKENS_PER_SECOND = 100_000;

/** The most threads a setting may name: more than a machine's cores only shares them. */
export const MAX_CLIENT_THREADS = 64;

export const SloSchema = z
  .object({
    ttftSeconds: z.number().positive().default(10).describe("Bound on time to first token, seconds."),
    ttftPercentile: z.number().gt(0).max(100).default(95).describe("Percentile of TTFT held to the bound."),
    itlSeconds: z
      .number()
      .positive()
      .default(0.1)
      .describe("Bound on inter-token latency per token, (e2e - TTFT) / (tokens - 1), seconds (0.1: 10 tok/s)."),
    itlPercentile: z.number().gt(0).max(100).default(95).describe("Percentile of ITL held to the bound."),
  })
  .strict()
  .describe("Latency SLO of goodput: what an interactive user would accept.");
export type Slo = z.infer<typeof SloSchema>;
export type SloInput = z.input<typeof SloSchema>;

export const CertificationSchema = z
  .strictObject({
    require: z
      .boolean()
      .default(true)
      .describe(
        "Only certified levels are figures: a level whose certificate fails is never saturation, sustained throughput, a knee or a capacity plan. false: certificates are still reported, and not certified levels still count (for servers without /metrics, knowingly).",
      ),
    tokenTolerance: z
      .number()
      .min(0)
      .max(0.5)
      .default(0.01)
      .describe("Reconciled: the server's generated-token count may differ from the client's by this fraction."),
    loadShortfall: z
      .number()
      .gt(0)
      .lt(1)
      .default(0.1)
      .describe(
        "Load: a closed-loop level whose mean requests in flight (while every worker had work) fall this fraction below its concurrency was not the load asked for.",
      ),
    maxClientStallShare: z
      .number()
      .gt(0)
      .max(1)
      .default(0.25)
      .describe(
        "Client: a level during which the benchmark's event loop stood still (its delays beyond the sampling interval, summed) for more than this share of the level's wall-clock time measured the client, not the server: the level's end, and so its throughput, may be late by that much.",
      ),
    maxTokensPerChunk: z
      .number()
      .int()
      .min(1)
      .max(1024)
      .default(16)
      .describe(
        "Received: a successful request whose usage claims more than this many tokens per output chunk the client received (content or reasoning) claims tokens it never sent. SGLang sends one event per stream_interval decode steps (default 1), a speculative step holding up to speculative_num_steps + 1 tokens (DFlash: its block, 16 in the shipped profiles); llama.cpp one event per token (a multi-byte character split over tokens: up to 4). Raise it for a server run with a larger stream_interval.",
      ),
    changeTolerance: z
      .number()
      .gt(0)
      .lt(1)
      .default(0.25)
      .describe(
        "Steady: a concurrency sweep's first level is measured again after its last (a rate the server keeps up with measures the load offered, not the server); a throughput that moved by more than this fraction from the first measurement means the server changed during the run (a throttle, a neighbour), and no level of the sweep is certified. The repeats of a level held to the same fraction: repeats that disagree beyond it are unstable, never averaged into a figure.",
      ),
    maxClientDelayShare: z
      .number()
      .gt(0)
      .max(1)
      .default(0.01)
      .describe(
        "Client: the most the client's own delays may cost a level, as a share: the window's time past its requests' span (the client starting and collecting them) and the closed-loop slots' idle time between a request's end and their next request's start, as shares of the window, and, where the server states its own timing of each request (a Server-Timing trailer or header with first-token and last-token durations), the client's lag reading the last token behind its writing, as a share of the server's request time; summed, they are how late the figure is. The first token's lag is held to it apart (it delays TTFT). 1 %: the same as tokenTolerance, and what bench/gate-client-paced.ts calls timed correctly; a figure the client made 1 % low is no better than a count 1 % off. A delay under half a second of wall time (the window's) or 10 ms per request (a lag) is noise.",
      ),
    maxClientCpuShare: z
      .number()
      .gt(0)
      .max(1)
      .default(0.9)
      .describe(
        "Client: a level during which the benchmark process was busy more than this share of one core had the client as its limit.",
      ),
  })
  .describe("The validity certificate of each benchmark level (gate/judge/certificate.ts).");
export type Certification = z.infer<typeof CertificationSchema>;

/** A duration knob in seconds, bounded so that no value overflows Node's timers (2^31-1 ms). */
const timerSeconds = () => z.number().positive().max(MAX_TIMER_SECONDS);
const timerMs = () => z.number().positive().max(MAX_TIMER_MS);

/** The model's own health at every refresh (gate/health/health.ts). */
export const HealthPolicySchema = z
  .strictObject({
    enabled: z
      .boolean()
      .default(true)
      .describe(
        "At every refresh (`gpuhost drift`, `pulumi refresh`), check the model's own health: the reference answer, the single-stream decode speed and (speculative services) the acceptance length, each against what was recorded at the last verified generation.",
      ),
    referencePrompt: z
      .string()
      .min(1)
      .default("In two sentences, explain why a serving host must prove that it generates.")
      .describe("The user message of the greedy (temperature 0) reference generation."),
    referenceMaxTokens: z
      .number()
      .int()
      .min(1)
      .max(512)
      .default(32)
      .describe("max_tokens of the reference generation: enough words to notice changed kernels, weights or parser."),
    answerMaxDifference: z
      .number()
      .min(0)
      .max(1)
      .default(0.2)
      .describe(
        "The largest difference between the reference answer and the recorded one that still counts as the same: word-level edit distance over the longer answer's words (0: identical, 1: nothing in common).",
      ),
    decodeProbeTokens: z
      .number()
      .int()
      .min(8)
      .max(1024)
      .default(64)
      .describe("Tokens of the single-stream decode probe (ignore_eos): seconds, not a benchmark."),
    tokensPerSecondFloorFraction: z
      .number()
      .gt(0)
      .max(1)
      .default(0.7)
      .describe(
        "The decode probe drifts below this fraction of the same probe's tokens per second at the last verification (a decode too fast to time over 0.25 s of wall clock, even stretched to 1,024 tokens, is not compared).",
      ),
    acceptanceBaselineFraction: z
      .number()
      .gt(0)
      .max(1)
      .default(0.8)
      .describe(
        "Speculative services: the acceptance length drifts below this fraction of the one recorded at verification (and always below the acceptance floor).",
      ),
    timeoutSeconds: timerSeconds()
      .default(30)
      .describe(
        "Timeout of each health request (host seconds); one that does not answer leaves the health not checked.",
      ),
    answerScoreMaxDrop: z
      .number()
      .min(0)
      .max(1)
      .default(0.05)
      .describe(
        "The answer check runs again at every refresh (when the verification checked answers): a score more than this below the verified one, or under verification.answers.passThreshold, is drift. 0.05 lets one of the shipped 24 answers flip (greedy decoding on GPUs is not batch-invariant).",
      ),
  })
  .prefault({})
  .describe(
    "The model's own health at every refresh: a greedy reference answer, a short single-stream decode and (speculative) the acceptance length, each against the last verified generation; a change is drift and the next `up` verifies the service again.",
  );
export type HealthPolicy = z.infer<typeof HealthPolicySchema>;

/** The answer check of the readiness gate (gate/readiness/answers.ts). */
export const AnswersPolicySchema = z
  .strictObject({
    file: z
      .string()
      .min(1)
      .default("default")
      .describe(
        'The answer set: "default" (the shipped set: arithmetic, facts, JSON objects, word counts), "none" (skip the check explicitly: every output then says "answers not checked"), or a JSONL file of {"prompt": ..., "expect": REGEX} lines (the regular expression, case-insensitive, that the visible answer must match), read where `pulumi up` or `gpuhost verify` runs.',
      ),
    passThreshold: z
      .number()
      .min(0)
      .max(1)
      .default(0.85)
      .describe(
        "The fraction of the set that must be answered right (no repetition loop, an answer outside reasoning) for the service to count as ready. A large instruction model answers the shipped set almost perfectly; a small test model needs a lower value.",
      ),
    maxTokens: z
      .number()
      .int()
      .min(8)
      .max(4096)
      .default(128)
      .describe("max_tokens of each answer when thinking is off (thinkingToggle) or the model does not think."),
    maxTokensThinking: z
      .number()
      .int()
      .min(8)
      .max(32768)
      .default(2048)
      .describe(
        "max_tokens of each answer when the model may think and thinking cannot be turned off: reasoning that spends it all is no answer.",
      ),
    concurrency: z
      .number()
      .int()
      .min(1)
      .max(64)
      .default(8)
      .describe("Answers requested at once (greedy, temperature 0); the check takes seconds, not a benchmark."),
    timeoutSeconds: timerSeconds()
      .default(300)
      .describe("Timeout of each answer request; it is still bounded by the gate's deadline."),
    speculativeMinExactMatch: z
      .number()
      .min(0)
      .max(1)
      .default(0.6)
      .describe(
        "With services.compare: a speculative service whose greedy answers equal the autoregressive service's on less than this fraction of the set is never recommended (vLLM's CI asks more than 60 % exact greedy match between speculative and plain decoding); one whose score is lower than autoregressive's never is either. Exact equality is not guaranteed on real GPUs (batch shape changes floating-point sums): hence a rate, not equality.",
      ),
  })
  .prefault({})
  .describe(
    "The answer check: after readiness, a fixed set of prompts with checkable answers, sent greedy; a score under passThreshold, a repetition loop or an answer only in reasoning fails the gate. Its answer certificate sits beside the throughput certificate.",
  );
export type AnswersPolicy = z.infer<typeof AnswersPolicySchema>;
export type AnswersPolicyInput = z.input<typeof AnswersPolicySchema>;

/**
 * The stack's own check of verification.answers.file, where the program runs: a team's set that
 * cannot be read or parsed is a config error at its path before anything is provisioned (the gate
 * reads it again when it runs; the provider's state parse does not, so a moved file fails the gate
 * with the same sentence rather than every refresh's parse).
 */
export function answersFileIssue(policy: { answers: { file: string } }, ctx: z.RefinementCtx): void {
  const file = policy.answers.file;
  if (file === "default" || file === "none") return;
  try {
    readAnswerSet(file, "answers.file");
  } catch (e) {
    ctx.addIssue({
      code: "custom",
      path: ["answers", "file"],
      message: (e as Error).message.replace(/^answers\.file: /, ""),
    });
  }
}

export const VerifyPolicySchema = z
  .strictObject({
    deadlineSeconds: timerSeconds()
      .default(1800)
      .describe(
        "One overall deadline for the whole gate, enforced by the gate itself (Node dynamic providers ignore customTimeouts). Loading a large model took 330-630 s in practice; no request outlives this deadline.",
      ),
    connectTimeoutSeconds: timerSeconds()
      .default(2)
      .describe("Timeout of one TCP connect attempt to the serving port."),
    refreshTimeoutSeconds: timerSeconds()
      .optional()
      .describe(
        "Timeout of the one tiny generation a refresh (`pulumi refresh`, `pulumi up`'s own refresh, `gpuhost drift`) sends to see that the service still generates; a host silent for this long reads as not generating. Unset: 60 s.",
      ),
    modelsTimeoutSeconds: timerSeconds()
      .default(10)
      .describe("Timeout of one GET /v1/models attempt (a server that accepts and never answers is retried)."),
    probeTimeoutSeconds: timerSeconds()
      .default(300)
      .describe(
        "Timeout of one probe chat completion. The first request may trigger a lazy JIT compile (FlashInfer sampling kernels), so this is long; it is still bounded by the overall deadline.",
      ),
    retryInitialIntervalMs: timerMs()
      .default(100)
      .describe("First retry interval while the server starts; retries back off from here with jitter."),
    retryMaxIntervalMs: timerMs()
      .default(250)
      .describe(
        "Cap of the retry interval. Kept small so readiness is detected within about half a second of the server starting to generate; every retry is one cheap TCP connect or HTTP request.",
      ),
    thinkingToggle: z
      .boolean()
      .default(false)
      .describe(
        'The model family\'s chat template accepts chat_template_kwargs {"thinking": false} (Kimi K2.x). When true the probe turns thinking off; otherwise the probe gives reasoning room through probeMaxTokensThinking.',
      ),
    probeMaxTokens: z
      .number()
      .int()
      .positive()
      .default(16)
      .describe(
        "max_tokens of the probe when thinking is off or absent (the warmup that worked: \"Say just 'OK'\", 16 tokens).",
      ),
    probeMaxTokensThinking: z
      .number()
      .int()
      .positive()
      .default(1024)
      .describe(
        "max_tokens of the probe when the model may think and thinking cannot be turned off. The probe streams and stops reading at the first visible answer token, so this only bounds the reasoning; reasoning that spends it all is no answer (not ready).",
      ),
    probePrompt: z.string().min(1).default("Say just 'OK'").describe("The probe's user message."),
    knownAnswer: z
      .string()
      .min(1)
      .optional()
      .describe(
        "When set, the probe's content must contain this text (case-insensitive), e.g. prompt 'What is 2+3? Answer with the number only.' and knownAnswer '5'. A wrong answer fails the gate at once.",
      ),
    stabilityProbes: z
      .number()
      .int()
      .min(1)
      .default(1)
      .describe(
        "Later generations that must also succeed after the first one. They sample (temperature > 0), so kernels used only for sampling are exercised too.",
      ),
    stabilityIntervalSeconds: z
      .number()
      .min(0)
      .max(MAX_TIMER_SECONDS)
      .default(0)
      .describe("Pause before each stability probe."),
    serviceCheckIntervalSeconds: timerSeconds()
      .default(5)
      .describe(
        "How often, while waiting, the service state (when a service check is configured) is polled to fail fast on a crashed or restarted unit.",
      ),
    serverGoneSeconds: timerSeconds()
      .default(3)
      .describe(
        "Once the port has accepted a connection, refused connections for this long mean the server process went away (it crashed): the gate stops at once instead of retrying to its deadline.",
      ),
    requireUsage: z
      .boolean()
      .default(false)
      .describe(
        "The stability probes read their streams to the end and must carry usage (stream_options.include_usage), because a benchmark follows that counts tokens from usage: a server whose streams carry none fails readiness with that reason instead of passing and then failing every benchmark request. VerifiedGeneration sets it when it benchmarks.",
      ),
    progressIntervalSeconds: timerSeconds()
      .default(10)
      .describe("While waiting, one progress line at most this often (phase changes are always reported)."),
    maxInvalidResponses: z
      .number()
      .int()
      .positive()
      .default(3)
      .describe(
        "Consecutive HTTP 200 responses that fail validation (no visible content, completion tokens 0, unknown finish_reason) before the gate gives up rather than waiting for the deadline.",
      ),
    health: HealthPolicySchema,
    answers: AnswersPolicySchema,
  })
  .describe("Readiness gate: what must be true before a served model counts as generating.");
export type VerifyPolicy = z.infer<typeof VerifyPolicySchema>;
export type VerifyPolicyInput = z.input<typeof VerifyPolicySchema>;

/**
 * Requests in flight at once, at most: each holds a connection and a stream parser in one Node
 * process, and beyond a few thousand they starve its event loop (Ctrl-C and the deadline stop
 * firing). Higher concurrency is measured from several clients.
 */
export const MAX_CONCURRENCY = 4096;
/** Requests in one run of a sweep level, at most (a level's requests are held in memory, each with its sample). */
export const MAX_REQUESTS_PER_LEVEL = 100_000;
export const CONCURRENCY_REASON =
  "each request in flight holds a connection and a stream in one Node process, and more starve its event loop (Ctrl-C and the deadline stop firing); measure higher concurrency from several clients";

export const BenchPlanSchema = z
  .strictObject({
    warmupMaxTokens: z
      .number()
      .int()
      .positive()
      .default(16)
      .describe("max_tokens of the warmup request (\"Say just 'OK'\")."),
    singleRequestMaxTokens: z
      .array(z.number().int().positive())
      .default([2048, 4096])
      .describe("max_tokens of the single (one at a time) request runs."),
    singleRequestPrompts: z
      .number()
      .int()
      .positive()
      .max(1000)
      .default(3)
      .describe("How many different prompts are sent, one after another, at each single-request max_tokens."),
    concurrency: z
      .array(z.number().int().positive().max(MAX_CONCURRENCY, `at most ${MAX_CONCURRENCY}: ${CONCURRENCY_REASON}`))
      .nonempty()
      .default([8, 16, 32, 48, 64])
      .describe("Concurrency levels of the sweep (requests in flight at once)."),
    sweepMaxTokens: z
      .number()
      .int()
      .positive()
      .default(2048)
      .describe("max_tokens of each sweep request (the story's (docs/story.md) completions were about 2,000 tokens)."),
    rate: z
      .array(z.number().positive().max(10_000))
      .nonempty()
      .optional()
      .describe(
        "Open loop: request rates per second (host time) offered with Poisson arrivals, whatever the server's state, instead of the concurrency sweep. A rate the server keeps up with measures the offered load, not capacity; one where it falls behind (rateShortfall) is saturated.",
      ),
    requestsPerConcurrency: z
      .number()
      .int()
      .positive()
      .max(1000)
      .default(2)
      .describe(
        "Requests per sweep level as a multiple of its concurrency (2: each slot runs two requests back to back). A rate level sends rate x 10 x this requests (ten seconds of arrivals per unit).",
      ),
    repeats: z
      .number()
      .int()
      .min(1)
      .max(100)
      .default(1)
      .describe(
        "Runs of each sweep level; with 2 or more, throughput and goodput carry a 95 % confidence interval over the runs.",
      ),
    mix: PromptMixSchema.optional().describe(
      "Weights of the shipped prompt categories (chat, code, long-context) for the sweep; absent: the long-answer benchmark prompts.",
    ),
    thinking: WorkloadShapeSchema.shape.thinking,
    slo: SloSchema.prefault({}).describe("Latency SLO of goodput (per level: tok/s of requests that met it)."),
    rateShortfall: z
      .number()
      .gt(0)
      .lt(1)
      .default(0.1)
      .describe(
        "Open loop: a rate level whose achieved rate (requests begun per second, by their first tokens) falls more than this fraction below the rate they were sent at is saturated.",
      ),
    ignoreEos: z
      .boolean()
      .default(true)
      .describe("Send ignore_eos so every request generates exactly max_tokens, as benchmark harnesses do."),
    requestTimeoutSeconds: timerSeconds()
      .default(900)
      .describe(
        "Timeout of one benchmark request, in the host's own time (on a simulated host, simulated seconds); a request that exceeds it counts as an error.",
      ),
    deadlineSeconds: timerSeconds()
      .default(7200)
      .describe(
        "Overall deadline of the benchmark, wall-clock seconds; levels not reached are skipped and the result is marked incomplete.",
      ),
    errorBudget: z
      .number()
      .min(0)
      .max(1)
      .default(0.01)
      .describe(
        "Largest fraction of failed requests a sweep level may have. A level over it is marked failed and never used for saturation, sustained throughput or a capacity plan.",
      ),
    kneeMinGain: z
      .number()
      .gt(0)
      .max(10)
      .default(0.1)
      .describe(
        "The knee (saturation) is the first level where doubling concurrency adds less than this fraction of throughput (gains between levels are normalised to one doubling).",
      ),
    certification: CertificationSchema.prefault({}).describe(
      "The validity certificate of each level (gate/judge/certificate.ts): reconciled with the server's /metrics, the load applied, the client not the limit, the server steady.",
    ),
    clientThreads: z
      .union([z.literal("auto"), z.number().int().min(1).max(MAX_CLIENT_THREADS)])
      .default("auto")
      .describe(
        `Worker threads the benchmark client spreads each sweep level over (gate/run/client-threads.ts). "auto": as many as the level's projected token rate needs, one per ${CLIENT_THREAD_TOKENS_PER_SECOND.toLocaleString("en-US")} streamed tokens per wall-clock second, at most one fewer than the cores (so none on 2 cores; one thread parsed about 600,000 on a core of the CI machine, its own client check failing there: README); a number: that many (1: the main thread alone). Each level's certificate judges every thread's client check either way.`,
      ),
    kneeMaxTtftP95Seconds: timerSeconds()
      .optional()
      .describe(
        "When set, the knee is also the last level before TTFT p95 crosses this bound: a level beyond it is not a usable operating point.",
      ),
  })
  .superRefine((plan, ctx) => {
    // A level's requests per run (gate/run/load.ts requestsPerRun), bounded like its concurrency.
    const rpc = plan.requestsPerConcurrency;
    const levels: [string, number, number][] = [
      ...plan.concurrency.map((c, i): [string, number, number] => [`concurrency.${i}`, c, c * rpc]),
      ...(plan.rate ?? []).map((r, i): [string, number, number] => [`rate.${i}`, r, Math.round(r * rpc * 10)]),
    ];
    for (const [where, level, requests] of levels) {
      if (requests <= MAX_REQUESTS_PER_LEVEL) continue;
      const [key, index] = where.split(".");
      ctx.addIssue({
        code: "custom",
        path: [key, Number(index)],
        message: `level ${level} x requestsPerConcurrency ${rpc}${key === "rate" ? " x 10" : ""} is ${requests.toLocaleString("en-US")} requests in one run, more than ${MAX_REQUESTS_PER_LEVEL.toLocaleString("en-US")} (each is held in memory with its measurement); lower requestsPerConcurrency`,
      });
    }
  })
  .describe("Benchmark run after readiness: warmup, single requests, a concurrency sweep or request rates.");
export type BenchPlan = z.infer<typeof BenchPlanSchema>;
export type BenchPlanInput = z.input<typeof BenchPlanSchema>;

export const WorkloadSchema = z
  .strictObject({
    completions: z
      .number()
      .int()
      .positive()
      .default(900_000)
      .describe("Completions to generate (the story: 900,000 training samples)."),
    outputTokensPerCompletion: z.number().positive().default(2000).describe("Average output tokens per completion."),
    hosts: z.number().int().positive().default(1).describe("Hosts the workload is spread over."),
    deadlineDays: z
      .number()
      .positive()
      .default(7)
      .describe("Deadline for the whole workload, used to compute the hosts needed."),
    bytesPerToken: z
      .number()
      .positive()
      .default(4)
      .describe("Raw storage per output token (UTF-8 text averages about 4 bytes per token)."),
  })
  .describe("The generation workload a capacity plan is computed for.");
export type Workload = z.infer<typeof WorkloadSchema>;
export type WorkloadInput = z.input<typeof WorkloadSchema>;
