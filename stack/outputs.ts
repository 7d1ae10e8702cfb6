// The one schema of everything the program (index.ts) exports: per host, what each component
// proved or measured, and the fleet's totals. index.ts is typed by it (a key added there and not
// here does not compile), and readers of `pulumi stack output --json` (capacity plans, other stacks
// through StackReference) can parse with it. No Pulumi import.
import { z } from "zod";
import { ServiceComparisonOutputsSchema } from "../gate/reports/outputs";
import { VerifiedGenerationOutputsSchema } from "../gate/reports/outputs";
import { HostSchema } from "./config";
import { driftSchema } from "../components/drift/schema";
import { SERVICE_KINDS } from "../components/services/schema";

export const HostOutputsSchema = z
  .object({
    gpus: HostSchema.shape.gpus.unwrap().describe("The GPUs the stack config says the host has"),
    toolkitFingerprint: z.string().describe("CudaToolkit: hash of the release and every package version"),
    nvccVersion: z.string().describe("CudaToolkit: nvcc's version through CUDA_HOME, e.g. V13.0.88"),
    toolkitProof: z.string().describe("CudaToolkit: what the proof-by-execution step did"),
    environmentLock: z.string().describe("ServingEnvironment: the pins and the toolkit the venv was built for"),
    jitWorkspace: z.string().describe("ServingEnvironment: FLASHINFER_WORKSPACE_BASE, keyed by the toolkit"),
    activeService: z.enum(SERVICE_KINDS).describe("ServingService: the service that runs"),
    activeUnit: z.string().describe("ServingService: its unit file name"),
    endpoint: z.string().describe("ServingService: the service's URL as seen on the host"),
    model: z.string().describe("ServingService: the served model name"),
    drift: z.array(driftSchema).describe("ToolkitState: fields in which the host differs from what was provisioned"),
    comparison: ServiceComparisonOutputsSchema.omit({ activeUnit: true })
      .nullable()
      .describe("ServiceComparison (services.compare): per-service table and recommendation; null when off"),
  })
  .extend(
    VerifiedGenerationOutputsSchema.pick({
      generating: true,
      readiness: true,
      singleRequest: true,
      sweep: true,
      saturationConcurrency: true,
      saturated: true,
      saturationVerdict: true,
      sustainedOutputTokensPerSecond: true,
      acceptanceLength: true,
      benchComplete: true,
      capacity: true,
    }).shape,
  )
  .describe("One host's outputs (VerifiedGeneration's measured half from gate/reports/outputs.ts)");
export type HostOutputs = z.infer<typeof HostOutputsSchema>;

export const StackOutputsSchema = z
  .object({
    gpuHosts: z.record(z.string(), HostOutputsSchema).describe("Per host, by name"),
    fleetSustainedOutputTokensPerSecond: z
      .number()
      .describe("Sum of the hosts' sustained output throughput (tokens/s): the fleet's capacity"),
    activeService: z
      .enum([...SERVICE_KINDS, "auto"])
      .describe("The configured service (auto: each host's comparison picks; see gpuHosts.<host>.activeService)"),
  })
  .describe("Everything index.ts exports");
export type StackOutputs = z.infer<typeof StackOutputsSchema>;
