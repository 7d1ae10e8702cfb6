/**
 * Where a host's measured throughput stands, as a stack output. A stack only says it where it knows
 * the GPU and the model's config.json; elsewhere it says why it does not know, rather than inventing
 * a host (the simulated host has no config.json). No Pulumi import.
 */
import { z } from "zod";
import { findGpu } from "./gpus";

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

/** What a stack can say of a host's roofline before it reads the model's config.json there. */
export function unknownRoofline(host: { connection: { kind: string }; gpus: { model?: string } }): RooflineOutput {
  if (host.connection.kind === "simulated")
    return { known: false, reason: "not known: the simulated host has no config.json" };
  if (host.gpus.model === undefined || findGpu(host.gpus.model) === undefined)
    return {
      known: false,
      reason: `not known: gpus.model ${host.gpus.model === undefined ? "is not set" : `"${host.gpus.model}" is not in the GPU catalogue (physics/gpus.ts)`}`,
    };
  return {
    known: false,
    reason:
      "not known: the stack does not read the model's config.json from the host yet; run `gpuhost plan --gpu --model-config` with a copy",
  };
}
