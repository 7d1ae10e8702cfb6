/**
 * Workload shapes for the benchmark: what is sent, not only how many at once. A shape mixes the
 * shipped prompt categories, draws output lengths (and long-context prompt lengths) from seeded
 * distributions, turns thinking on or off with an extra request body, and arrives either as a
 * closed loop (N clients, each sending its next request when the last ends) or open loop (Poisson
 * arrivals at a request rate, whatever the server's state).
 */
import { z } from "zod";
import { drawLength, seededRandom } from "../../seeded-draws";
import { BENCH_PROMPTS, PROMPT_CATEGORIES, shippedPrompt, type PromptCategory } from "./prompts";

const lengthDistribution = z
  .discriminatedUnion("distribution", [
    z.object({ distribution: z.literal("fixed"), tokens: z.number().int().positive() }).strict(),
    z
      .object({
        distribution: z.literal("uniform"),
        min: z.number().int().positive(),
        max: z.number().int().positive(),
      })
      .strict(),
    z
      .object({
        distribution: z.literal("lognormal"),
        median: z.number().positive(),
        sigma: z.number().nonnegative(),
        min: z.number().int().positive().default(1),
        max: z.number().int().positive(),
      })
      .strict(),
  ])
  .describe("a token count drawn per request (seeded): fixed, uniform min..max, or lognormal median/sigma clamped");
export type LengthDistribution = z.infer<typeof lengthDistribution>;

export const PromptMixSchema = z
  .object({
    chat: z.number().nonnegative().optional().describe("Weight of chat prompts."),
    code: z.number().nonnegative().optional().describe("Weight of coding prompts."),
    "long-context": z
      .number()
      .nonnegative()
      .optional()
      .describe(
        "Weight of long-context prompts (a comparison sets their length with longContextTokens; bench sends 16,384 tokens).",
      ),
  })
  .strict()
  .refine((m) => Object.values(m).some((w) => w > 0), { message: "at least one category needs a weight > 0" })
  .describe("Weights of the shipped prompt categories: chat, code, long-context.");
export type PromptMix = z.infer<typeof PromptMixSchema>;

export const WorkloadShapeSchema = z
  .object({
    mix: PromptMixSchema.default({ chat: 1, code: 1 }),
    outputTokens: lengthDistribution
      .default({ distribution: "fixed", tokens: 2048 })
      .describe("max_tokens of each request (with ignoreEos, exactly the tokens generated)."),
    longContextTokens: lengthDistribution
      .default({ distribution: "fixed", tokens: 16384 })
      .describe("Prompt length of long-context requests."),
    thinking: z
      .boolean()
      .nullable()
      .default(null)
      .describe('Send chat_template_kwargs {"thinking": true|false} (Kimi K2.x, Qwen3); null: the server\'s default.'),
    ignoreEos: z.boolean().default(true).describe("Send ignore_eos so each request generates exactly max_tokens."),
    mode: z
      .enum(["closed", "open"])
      .default("closed")
      .describe("closed: levels are concurrencies; open: levels are request rates with Poisson arrivals."),
    seed: z.number().int().default(1).describe("Seed of every draw (prompts, lengths, arrivals)."),
  })
  .strict()
  .describe("What the benchmark sends.");
export type WorkloadShape = z.infer<typeof WorkloadShapeSchema>;
export type WorkloadShapeInput = z.input<typeof WorkloadShapeSchema>;

/** The category of a uniform draw u in [0, 1), by the mix's weights (in PROMPT_CATEGORIES order). */
export function pickCategory(mix: Partial<Record<PromptCategory, number>>, u: number): PromptCategory {
  const entries = PROMPT_CATEGORIES.map((c) => [c, mix[c] ?? 0] as const).filter(([, w]) => w > 0);
  const total = entries.reduce((a, [, w]) => a + w, 0);
  let acc = 0;
  for (const [c, w] of entries) {
    acc += w / total;
    if (u < acc) return c;
  }
  return entries[entries.length - 1][0];
}

export interface ShapedRequest {
  category: PromptCategory;
  prompt: string;
  maxTokens: number;
  /** Fields added to the chat completion body. */
  extraBody: Record<string, unknown>;
}

/** The i-th request of a shape: a pure function of (shape, i), so every service gets the same ones. */
export function shapedRequest(shape: WorkloadShape, i: number): ShapedRequest {
  const random = seededRandom((shape.seed * 0x9e3779b1 + i * 0x85ebca6b) >>> 0);
  const category = pickCategory(shape.mix, random());
  const maxTokens = drawLength(shape.outputTokens, random);
  const promptTokens = category === "long-context" ? drawLength(shape.longContextTokens, random) : 0;
  const extraBody: Record<string, unknown> = {};
  if (shape.thinking !== null) extraBody.chat_template_kwargs = { thinking: shape.thinking };
  if (shape.ignoreEos) extraBody.ignore_eos = true;
  return { category, prompt: shippedPrompt(category, i, promptTokens), maxTokens, extraBody };
}

/**
 * What a sweep sends, as data rather than a function: a client thread (client-threads.ts) rebuilds
 * the i-th request from it, so requests spread over threads are the ones one thread would send.
 */
export type RequestSource =
  | { kind: "shape"; shape: WorkloadShape }
  | { kind: "prompts"; prompts: readonly string[]; maxTokens: number; extraBody: Record<string, unknown> };

/** The i-th request of SOURCE (a pure function of both). */
export function requestAt(
  source: RequestSource,
  i: number,
): { prompt: string; maxTokens: number; extraBody: Record<string, unknown> } {
  if (source.kind === "shape") return shapedRequest(source.shape, i);
  return {
    prompt: source.prompts[i % source.prompts.length],
    maxTokens: source.maxTokens,
    extraBody: source.extraBody,
  };
}

/**
 * A plan's loop and levels: its offered rates (open loop) where it has any, else its concurrencies
 * (closed): the one reading of both, for bench(), its summary and the comparison.
 */
export function levelsOf(plan: { rate?: readonly number[]; concurrency: readonly number[] }): {
  mode: "open" | "closed";
  levels: number[];
} {
  return plan.rate ? { mode: "open", levels: [...plan.rate] } : { mode: "closed", levels: [...plan.concurrency] };
}

/**
 * What a plan's sweep sends (the one reading, for bench(), the comparison and the mixed fleet's
 * classes): the plan's prompt mix, or without one the long-answer prompts; each of sweepMaxTokens,
 * thinking and ignore_eos as the plan says.
 */
export function requestsOf(plan: {
  mix?: PromptMix;
  sweepMaxTokens: number;
  thinking: boolean | null;
  ignoreEos: boolean;
}): RequestSource {
  if (plan.mix) {
    const shape = WorkloadShapeSchema.parse({
      mix: plan.mix,
      outputTokens: { distribution: "fixed", tokens: plan.sweepMaxTokens },
      thinking: plan.thinking,
      ignoreEos: plan.ignoreEos,
    });
    return { kind: "shape", shape };
  }
  const thinking = plan.thinking === null ? {} : { chat_template_kwargs: { thinking: plan.thinking } };
  return {
    kind: "prompts",
    prompts: BENCH_PROMPTS,
    maxTokens: plan.sweepMaxTokens,
    extraBody: { ...(plan.ignoreEos ? { ignore_eos: true } : {}), ...thinking },
  };
}

/**
 * Poisson arrivals: `count` send times (seconds from the level's start) at `rate` requests per
 * second; the gaps are exponential, -ln(1 - u) / rate.
 */
export function poissonArrivals(rate: number, count: number, seed: number): number[] {
  if (!(rate > 0)) throw new Error(`request rate must be > 0, got ${rate}`);
  const random = seededRandom(seed);
  const times: number[] = [];
  let t = 0;
  for (let i = 0; i < count; i++) {
    times.push(t);
    t += -Math.log(1 - random()) / rate;
  }
  return times;
}
