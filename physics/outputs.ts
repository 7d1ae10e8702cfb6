/**
 * Where a host's measured throughput stands, as a stack output. A stack only says it where it knows
 * the GPU (gpus.model, in the catalogue) and has read the model's config.json on the host
 * (components/services/model-config.ts); elsewhere it says why it does not know, rather than
 * inventing a host. No Pulumi import.
 */
import { z } from "zod";
import { findGpu } from "./gpus";
import { ModelConfigError, modelFacts, type ModelFacts } from "./model-config";
import { roofline } from "./roofline";

export const RooflineOutputSchema = z
  .discriminatedUnion("known", [
    z.object({
      known: z.literal(true),
      gpu: z.string(),
      gpus: z.number().int(),
      bytesPerStepGB: z.number().describe("Weights one decode step reads at batch 1"),
      batch1TokensPerSecond: z.number().describe("Bandwidth roofline at batch 1"),
      computeBoundTokensPerSecond: z.number(),
      kvBoundConcurrency: z.number().int().nullable(),
      fraction: z.number().nullable().describe("The sustained figure over the roofline at its concurrency"),
      limiter: z.string().nullable(),
      lever: z.string().nullable(),
    }),
    z.object({ known: z.literal(false), reason: z.string().describe("Why the roofline is not known") }),
  ])
  .describe("Where the sustained throughput stands against the host's roofline (docs/physics.md)");
export type RooflineOutput = z.infer<typeof RooflineOutputSchema>;

/** The host's entry of config `hosts`, as far as its roofline needs it. */
export interface RooflineHost {
  gpus: { count: number; model?: string };
}

/** What the services' model-config.sh printed on the host (found/config, missing or toolarge). */
export type ModelConfigRead = Readonly<Record<string, string>>;

/**
 * Where a host's measured throughput stands against its roofline: the GPU from the catalogue, the
 * model's facts from the config.json read on the host, the sustained figure at its concurrency.
 * Says why it is not known instead where one of them is missing.
 */
export function hostRoofline(
  host: RooflineHost,
  read: ModelConfigRead | undefined,
  shape: {
    /** SGLang's --mem-fraction-static (DEFAULT_MEM_FRACTION_STATIC where the stack sets none). */
    memFractionStatic: number;
    /** Tokens of context per sequence the KV bound assumes: the workload's output tokens. */
    contextTokens: number;
  },
  measured: { concurrency: number | null; tokensPerSecond: number | null; speculative: boolean },
): RooflineOutput {
  const model = modelOf(read);
  const gpu = host.gpus.model === undefined ? undefined : findGpu(host.gpus.model);
  const gpuReason =
    host.gpus.count === 0
      ? "the host has no GPUs (gpus.count 0)"
      : host.gpus.model === undefined
        ? "gpus.model is not set"
        : gpu === undefined
          ? `gpus.model "${host.gpus.model}" is not in the GPU catalogue (physics/gpus.ts)`
          : undefined;
  if (gpuReason !== undefined || !gpu || "reason" in model)
    return {
      known: false,
      reason: `not known: ${[gpuReason, "reason" in model ? model.reason : undefined].filter(Boolean).join("; ")}${"facts" in model ? ` (the model's config.json was read: ${model.found})` : ""}`,
    };
  const at =
    measured.concurrency !== null && measured.tokensPerSecond !== null && measured.tokensPerSecond > 0
      ? {
          concurrency: measured.concurrency,
          tokensPerSecond: measured.tokensPerSecond,
          speculative: measured.speculative,
        }
      : undefined;
  const r = roofline(model.facts, { gpu, gpus: host.gpus.count, ...shape }, at);
  return {
    known: true,
    gpu: r.gpu,
    gpus: r.gpus,
    bytesPerStepGB: r.bytesPerStepGB,
    batch1TokensPerSecond: r.batch1TokensPerSecond,
    computeBoundTokensPerSecond: r.computeBoundTokensPerSecond,
    kvBoundConcurrency: r.kvBoundConcurrency,
    fraction: r.atConcurrency?.fraction ?? null,
    limiter: r.atConcurrency?.limiter ?? null,
    lever: r.atConcurrency?.lever ?? null,
  };
}

/** The model's facts from what the host script printed, or why there are none. */
function modelOf(read: ModelConfigRead | undefined): { facts: ModelFacts; found: string } | { reason: string } {
  if (read === undefined) return { reason: "the model's config.json was not read" };
  if (read.toolarge !== undefined) return { reason: `${read.toolarge} is over 1 MiB, not a model's config.json` };
  if (read.found === undefined || read.config === undefined)
    return { reason: `no config.json on the host at ${read.missing ?? "the model's path"}` };
  try {
    return { facts: modelFacts(JSON.parse(Buffer.from(read.config, "base64").toString("utf8"))), found: read.found };
  } catch (err) {
    const why = err instanceof ModelConfigError ? err.message : "it is not JSON";
    return { reason: `${read.found} on the host cannot be sized (${why})` };
  }
}
