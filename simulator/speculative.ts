/**
 * Speculative decoding, modelled from published behaviour rather than one fixed speed-up:
 *
 * - Acceptance. A draft proposes up to `m` tokens per verify step (EAGLE family with topk 1:
 *   num_steps + 1; DFlash: the block size). With a per-token acceptance rate a, the expected tokens
 *   per step are (1 - a^m) / (1 - a) (Leviathan et al., "Fast Inference from Transformers via
 *   Speculative Decoding", 2023). A profile states the measured accept length at its reference
 *   settings, by batch; `a` is solved from it, so other flag settings get their own accept length.
 *   The content scales the rejection rate 1 - a (code and chat differ; random-token prompts
 *   inflate acceptance: 74.6 % vs 48.5 %, lightseekorg/tokenspeed #1305, i.e. about half the
 *   rejections), and so does the context length (drafts trained on short sequences reject more
 *   on long prompts).
 * - Cost. One draft + verify step costs `verifyCost(b)` autoregressive steps at batch b, from the
 *   profile, at the reference settings; other settings scale the part above 1 by the work
 *   (drafted steps + verified tokens). Long prompts add `longContextCost` per step (verifying a
 *   block attends over the whole context). Because the verify cost grows with the batch while the
 *   acceptance does not, the gain fades as concurrency grows and turns into a loss.
 * Pure functions; the scheduler and /sim/truth both call them.
 */
import { z } from "zod";

const batchPoint = z.object({
  batch: z.number().int().min(1).describe("running requests in the batch"),
  value: z.number().positive().describe("the quantity at that batch size"),
});
const tokensPoint = z.object({
  tokens: z.number().int().min(0).describe("prompt tokens"),
  value: z.number().nonnegative().describe("the quantity at that prompt length"),
});
const sorted = <T extends { batch?: number; tokens?: number }>(key: "batch" | "tokens") =>
  ((points: T[]) => points.every((p, i) => i === 0 || (p[key] as number) > (points[i - 1][key] as number))) as (
    points: T[],
  ) => boolean;

export const batchCurveSchema = z
  .array(batchPoint)
  .min(1)
  .refine(sorted("batch"), { message: "points must be sorted by strictly increasing batch" });
const tokensCurveSchema = z
  .array(tokensPoint)
  .min(1)
  .refine(sorted("tokens"), { message: "points must be sorted by strictly increasing tokens" });

export const CONTENT_KINDS = ["chat", "code", "random"] as const;
export type ContentKind = (typeof CONTENT_KINDS)[number];

export const ALGORITHMS = ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH"] as const;
export type Algorithm = (typeof ALGORITHMS)[number];

export const specSettingsSchema = z.object({
  numSteps: z.number().int().positive().describe("--speculative-num-steps"),
  eagleTopk: z.number().int().positive().describe("--speculative-eagle-topk"),
  numDraftTokens: z.number().int().positive().describe("--speculative-num-draft-tokens (DFlash: the block size)"),
});
export type SpecSettings = z.infer<typeof specSettingsSchema>;

/** How one draft model behaves on one host; the numbers' sources are named in the profile files. */
export const draftModelSchema = z.object({
  draftModelPath: z.string().describe("the draft the numbers were measured with (reported in server info)"),
  reference: specSettingsSchema.describe("the flag settings acceptLength and verifyCost were measured at"),
  acceptLength: batchCurveSchema.describe("mean tokens per verify step on chat prompts at the reference settings"),
  verifyCost: batchCurveSchema.describe("one draft+verify step in autoregressive steps at that batch"),
  contentRejectRate: z
    .object({ chat: z.number().positive(), code: z.number().positive(), random: z.number().positive() })
    .describe("multiplier on the per-token rejection rate (1 - a) by content (chat = 1)"),
  contextRejectRate: tokensCurveSchema.describe("multiplier on the per-token rejection rate (1 - a) by prompt length"),
  longContextCost: tokensCurveSchema.describe("verify cost added per step by prompt length"),
});
export type DraftModel = z.infer<typeof draftModelSchema>;

export interface Point {
  x: number;
  y: number;
}

/** Piecewise-linear, flat beyond the ends. */
export function interpolate(points: Point[], x: number): number {
  if (x <= points[0].x) return points[0].y;
  for (let i = 1; i < points.length; i++) {
    const hi = points[i];
    if (x <= hi.x) {
      const lo = points[i - 1];
      return lo.y + ((hi.y - lo.y) * (x - lo.x)) / (hi.x - lo.x);
    }
  }
  return points[points.length - 1].y;
}

/** A batch curve (a profile's, a draft's) at a batch size: piecewise-linear, flat beyond the ends. */
export const curveAt = (c: Array<{ batch: number; value: number }>, b: number) =>
  interpolate(
    c.map((p) => ({ x: p.batch, y: p.value })),
    b,
  );
const byTokens = (c: Array<{ tokens: number; value: number }>, t: number) =>
  interpolate(
    c.map((p) => ({ x: p.tokens, y: p.value })),
    t,
  );

/** The most tokens one verify step can yield. */
export function maxAccept(algorithm: Algorithm, s: SpecSettings): number {
  if (algorithm === "DFLASH") return s.numDraftTokens;
  return Math.max(1, Math.min(s.numSteps + 1, s.numDraftTokens));
}

/** Expected tokens per step for per-token acceptance rate a and at most m tokens. */
export function chainAccept(a: number, m: number): number {
  if (a >= 1) return m;
  if (a <= 0) return 1;
  return (1 - a ** m) / (1 - a);
}

/** The per-token rate a with chainAccept(a, m) = length (bisection; length is clamped to [1, m]). */
export function solveAcceptRate(length: number, m: number): number {
  if (length <= 1) return 0;
  if (length >= m) return 1;
  let lo = 0;
  let hi = 1;
  for (let i = 0; i < 60; i++) {
    const mid = (lo + hi) / 2;
    if (chainAccept(mid, m) < length) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/** topk > 1 drafts a tree: more candidates per position, so a higher chance one of them is accepted. */
function treeRate(a: number, topk: number): number {
  return 1 - (1 - a) ** Math.sqrt(topk);
}

export interface RequestShape {
  content: ContentKind;
  promptTokens: number;
}

export const SHORT_CHAT: RequestShape = { content: "chat", promptTokens: 0 };

/** Mean tokens per verify step for this draft, settings, batch and request. */
export function acceptLength(
  draft: DraftModel,
  algorithm: Algorithm,
  settings: SpecSettings,
  batch: number,
  shape: RequestShape = SHORT_CHAT,
): number {
  const mRef = maxAccept(algorithm, draft.reference);
  const aRef = solveAcceptRate(curveAt(draft.acceptLength, batch), mRef);
  const refTopk = algorithm === "DFLASH" ? 1 : draft.reference.eagleTopk;
  const topk = algorithm === "DFLASH" ? 1 : settings.eagleTopk;
  // Undo the reference's tree, apply this one's, then content and context.
  const chain = refTopk > 1 ? 1 - (1 - aRef) ** (1 / Math.sqrt(refTopk)) : aRef;
  const factor = draft.contentRejectRate[shape.content] * byTokens(draft.contextRejectRate, shape.promptTokens);
  const a = Math.min(0.995, Math.max(0, 1 - (1 - treeRate(chain, topk)) * factor));
  return chainAccept(a, maxAccept(algorithm, settings));
}

/** Autoregressive steps one draft+verify step costs. */
export function stepCost(
  draft: DraftModel,
  settings: SpecSettings,
  batch: number,
  shape: RequestShape = SHORT_CHAT,
): number {
  const work = (s: SpecSettings) => s.numSteps + s.numDraftTokens;
  const above = curveAt(draft.verifyCost, batch) - 1;
  return 1 + above * (work(settings) / work(draft.reference)) + byTokens(draft.longContextCost, shape.promptTokens);
}
