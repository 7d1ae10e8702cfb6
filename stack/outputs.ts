// The one schema of everything the program (index.ts) exports: per host, what each component
// proved or measured, and the fleet's totals. index.ts is typed by it (a key added there and not
// here does not compile), and readers of `pulumi stack output --json` (capacity plans, other stacks
// through StackReference) can parse with it. No Pulumi import.
import { z } from "zod";
import { CertificateOutputSchema, ServiceComparisonOutputsSchema } from "../gate/reports/outputs";
import { VerifiedGenerationOutputsSchema } from "../gate/reports/outputs";
import { HostSchema } from "./config";
import { driftSchema } from "../components/drift/schema";
import { SERVICE_KINDS } from "../components/services/schema";
import { RooflineOutputSchema } from "../physics/outputs";
import { TopologyReportSchema } from "../components/cuda-toolkit/topology";
import { MixedFleetOutputSchema } from "../components/fleet-verification/groups";

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
    // Optional: state written before the roofline existed still parses.
    roofline: RooflineOutputSchema.optional(),
    // Optional for the same reason: state written before verification reported the links.
    topology: TopologyReportSchema.optional().describe(
      "CudaToolkit: the GPUs' PCIe links, `nvidia-smi topo -m` and the peer-to-peer test, with their problems",
    ),
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
      answerCertificate: true,
    }).shape,
  )
  .describe("One host's outputs (VerifiedGeneration's measured half from gate/reports/outputs.ts)");
export type HostOutputs = z.infer<typeof HostOutputsSchema>;

const FleetPlanSchema = z
  .object({
    hosts: z.number().int().describe("Workers the fleet was measured with"),
    totalOutputTokens: z.number().describe("The configured job: completions x output tokens per completion"),
    daysForJob: z.number().nullable().describe("Days the job takes on this fleet at its measured sustained rate"),
    deadlineDays: z.number().describe("The configured deadline (workload.deadlineDays)"),
    hostsForDeadline: z
      .number()
      .int()
      .nullable()
      .describe("Hosts the deadline needs at this fleet's rate per host (routing overhead included)"),
    hostsMissing: z.number().int().nullable().describe("hostsForDeadline minus the hosts the fleet has (0: enough)"),
  })
  .describe(
    "The fleet's capacity plan (a mixed fleet: the job on its batch group, at the batch class's measured rate)",
  );

export const FleetOutputsSchema = z
  .object({
    routerEndpoint: z.string().describe("Router: the fleet's endpoint (SMG), as its machine sees it"),
    smgVersion: z.string().describe("Router: `smg --version` of the installed, hash-locked release"),
    registered: z
      .array(
        z.object({
          name: z.string(),
          url: z.string().describe("The worker's URL as the router reaches it"),
          requests: z
            .number()
            .describe("Requests the router sent it during the fleet benchmark (smg_worker_requests_total)"),
          share: z.number().nullable().describe("Its share of those requests (0-1)"),
          hostSustainedOutputTokensPerSecond: z
            .number()
            .nullable()
            .describe("The host's own sustained tok/s, from its VerifiedGeneration"),
        }),
      )
      .describe("Hosts whose gate passed in this update: the router's workers"),
    leftOut: z
      .array(z.object({ name: z.string(), url: z.string(), reason: z.string() }))
      .describe("Hosts not registered, each with why"),
    sweep: z
      .array(
        z.object({
          concurrency: z.number(),
          offeredRequestsPerSecond: z
            .number()
            .nullable()
            .optional()
            .describe(
              "Rate runs (benchmark.rate): the rate offered, concurrency then what it kept in flight; null: a concurrency level; absent: state from before",
            ),
          outputTokensPerSecond: z.number(),
          requests: z.number(),
          errors: z.number(),
          certificate: CertificateOutputSchema.optional().describe(
            "the level's validity certificate, reconciled with the workers' summed counters; absent: state from before",
          ),
        }),
      )
      .describe(
        "The fleet benchmark through the router, per level: the host's concurrency levels or rates x workers; empty for a mixed fleet (its classes are measured at once: `mixed`)",
      ),
    saturationConcurrency: z.number().nullable().describe("The fleet's knee"),
    sustainedOutputTokensPerSecond: z
      .number()
      .describe(
        "The fleet's sustained output tok/s through the router: its level's mean over the runs; a mixed fleet: both classes' tok/s in the mixed window",
      ),
    sustainedInterval: z
      .object({
        low: z.number(),
        high: z.number(),
        halfWidth: z.number(),
        runs: z.number().int().describe("Runs of the level (router.benchRepeats, or benchmark.repeats where larger)"),
      })
      .nullable()
      .describe("95 % interval of the sustained level's tok/s over its runs; null when no level counted"),
    hostsSustainedOutputTokensPerSecond: z.number().describe("Sum of the registered hosts' own sustained tok/s"),
    scalingEfficiency: z
      .number()
      .nullable()
      .describe("Fleet sustained over the sum of the hosts' own sustained figures (1: perfect scaling)"),
    plan: FleetPlanSchema,
    drift: z
      .array(driftSchema)
      .describe(
        "FleetVerification's refresh: each worker missing, unhealthy or unknown to the stack, another smg than the pinned one, or a router that does not answer, with what was expected, found and how to repair; empty: none",
      ),
    // Optional: state written before mixed fleets existed still parses.
    mixed: MixedFleetOutputSchema.nullable()
      .optional()
      .describe("A mixed fleet (router.groups); null: one class, measured by the sweep above"),
    verifiedAt: z.string().describe("When the fleet was verified and measured"),
  })
  .describe("The fleet behind the router (config `router`): FleetVerification's outputs");
export type FleetOutputs = z.infer<typeof FleetOutputsSchema>;

export const StackOutputsSchema = z
  .object({
    gpuHosts: z.record(z.string(), HostOutputsSchema).describe("Per host, by name"),
    fleetSustainedOutputTokensPerSecond: z
      .number()
      .describe("Sum of the hosts' sustained output throughput (tokens/s): the fleet's capacity"),
    activeService: z
      .enum([...SERVICE_KINDS, "auto"])
      .describe("The configured service (auto: each host's comparison picks; see gpuHosts.<host>.activeService)"),
    fleet: FleetOutputsSchema.nullable().describe("The fleet behind SMG (config `router`); null without a router"),
  })
  .describe("Everything index.ts exports");
export type StackOutputs = z.infer<typeof StackOutputsSchema>;
