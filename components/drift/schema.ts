// The shapes ToolkitState works with: what provisioning expects, what the probe observes, what
// drifted. One zod schema per shape, with descriptions; types derive from them. Loaded only by
// provider-impl.ts at call time (never captured into the serialized provider: zod does not
// serialize, pulumi#5294).
import { z } from "zod";

/** What provisioning set up, and therefore what the host must keep matching. */
export const expectedStateSchema = z
  .object({
    toolkitVersion: z
      .string()
      .regex(/^\d+\.\d+$/)
      .describe("CUDA toolkit release nvcc must report through CUDA_HOME (and through PATH), e.g. 13.0"),
    cudaHome: z
      .string()
      .startsWith("/")
      .describe("CUDA_HOME as the units set it, e.g. /usr/local/cuda-13.0 (FlashInfer looks for nvcc here first)"),
    unitPath: z
      .string()
      .optional()
      .describe("PATH as the units set it; when set, `which nvcc` through it must find the same toolkit"),
    cudaLink: z
      .string()
      .startsWith("/")
      .describe("Where /usr/local/cuda must point once update-alternatives' links are followed"),
    packageSuffix: z
      .string()
      .regex(/^\d+-\d+$/)
      .describe("Version suffix of the toolkit's package names (13-0): the probe lists cuda-*-SUFFIX and lib*-SUFFIX"),
    packages: z
      .record(z.string(), z.string())
      .describe("Package name -> version that must be installed; an empty version means any version"),
    files: z
      .record(z.string(), z.string())
      .describe(
        "Absolute path of each file the toolkit must provide -> the package that provides it (for the repair hint)",
      ),
    units: z
      .record(
        z.string(),
        z
          .object({
            sha256: z
              .string()
              .regex(/^[0-9a-f]{64}$/)
              .describe("sha256 of the rendered unit file's content"),
            enabled: z
              .string()
              .optional()
              .describe("Expected `systemctl is-enabled` answer (enabled, disabled, ...); unset: not checked"),
            active: z
              .string()
              .optional()
              .describe("Expected `systemctl is-active` answer (active, inactive, ...); unset: not checked"),
          })
          .strict(),
      )
      .default({})
      .describe("Absolute path of each rendered unit file -> what it must be"),
    jitBase: z
      .string()
      .startsWith("/")
      .optional()
      .describe("Folder whose sub-folders are FlashInfer JIT caches, one per toolkit key"),
    venvPath: z
      .string()
      .startsWith("/")
      .optional()
      .describe("The serving venv: a wheel of another CUDA release in it (a `pip install` by hand) is drift"),
    jitKey: z
      .string()
      .optional()
      .describe("The toolkit key of the JIT cache in use: the only sub-folder of jitBase (stale caches are drift)"),
  })
  .strict();
export type ExpectedState = z.infer<typeof expectedStateSchema>;

/** What probe.sh prints (scripts/probe.sh; paths are host paths, without GPUHOST_ROOT). */
export const observedStateSchema = z.object({
  probeFormat: z.literal(1),
  cudaHome: z.object({ dir: z.string(), nvcc: z.string().nullable(), version: z.string().nullable() }),
  pathNvcc: z.object({ nvcc: z.string().nullable(), version: z.string().nullable() }),
  cudaLink: z.string().nullable().describe("Fully resolved target of /usr/local/cuda; null when absent"),
  packages: z.record(z.string(), z.string()).describe("Installed cuda-*-SUFFIX and lib*-SUFFIX packages -> version"),
  files: z.record(z.string(), z.string().nullable()).describe("Required file -> sha256, null when missing"),
  gpu: z.object({
    nvidiaSmi: z.boolean(),
    driverVersion: z.string().nullable(),
    computeCapabilities: z.array(z.string()),
  }),
  jit: z.object({ base: z.string().nullable(), keys: z.array(z.string()) }),
  units: z.record(
    z.string(),
    z.object({ name: z.string(), sha256: z.string().nullable(), enabled: z.string(), active: z.string() }),
  ),
  venvWheels: z
    .record(z.string(), z.string())
    .default({})
    .describe("The venv's nvidia-* and cuda-* wheels as pip recorded them (dist-info name -> version)"),
  errors: z.array(z.string()),
  apiKeyFile: z
    .enum(["match", "differs", "missing"])
    .optional()
    .describe(
      "The API key file against the configured key, compared on the host (api-key-file.sh --check): no hash of the key is recorded anywhere",
    ),
  apiKeyRunning: z
    .enum(["match", "differs", "unknown"])
    .optional()
    .describe(
      "The key the active service started with (systemd's copy of its credential, /run/credentials/UNIT/ID) against the " +
        "configured key, compared on the host like apiKeyFile; unknown when there is no copy to read (the unit is not running)",
    ),
});
export type ObservedState = z.infer<typeof observedStateSchema>;

/**
 * What no provisioning step states up front, so create records it as observed and later probes
 * compare against it: file contents (a replaced header) and the GPU driver and devices.
 * `pulumi up --replace` on the resource re-records it.
 */
export interface Baseline {
  files: Record<string, string | null>;
  driverVersion: string | null;
  computeCapabilities: string[];
}

/** One drifted field: what was expected, what was found, and how to repair it. */
export const driftSchema = z
  .object({
    field: z
      .string()
      .describe(
        "Path of the field, e.g. `packages.libcurand-dev-13-0` or `units./etc/systemd/system/x.service.sha256`",
      ),
    expected: z.string().nullable(),
    found: z.string().nullable(),
    repair: z.string(),
  })
  .describe("One drifted field: what was expected, what was found, and how to repair it");
export type Drift = z.infer<typeof driftSchema>;

export const onDriftSchema = z
  .enum(["fail", "record", "repair"])
  .default("fail")
  .describe(
    "What update does when the host does not match what was expected: fail the deployment (default), only record it, or " +
      "repair it (run the `repairs` steps for what drifted and reinstall the packages of changed files, re-probe, and fail " +
      "naming what is still wrong). create never repairs: provisioning has just run, so a mismatch there is a failure",
  );
export type OnDrift = z.infer<typeof onDriftSchema>;

/** A repo-relative path of a host script: no leading slash, no `..`, ends in .sh. */
const repoScriptPath = z
  .string()
  .regex(/^[A-Za-z0-9_][A-Za-z0-9._/-]*\.sh$/, "must be a .sh path relative to the project root")
  .refine((p) => !p.split("/").includes(".."), "must not leave the project root");

/**
 * One repair: a host script of the repository with its arguments, exactly as the provisioning
 * Command runs it (the components export the builders, so the two cannot disagree), and the drift
 * fields it repairs.
 */
export const repairStepSchema = z
  .object({
    fields: z
      .array(z.string().min(1))
      .min(1)
      .describe(
        "Drift fields this step repairs, as prefixes: it runs when a drifted field starts with one of them " +
          "(`packages.`, `cudaLink`, `units./etc/systemd/system/x.service.sha256`)",
      ),
    script: repoScriptPath.describe(
      "The host script, relative to the project root, e.g. components/cuda-toolkit/scripts/install.sh",
    ),
    args: z.array(z.string()).default([]).describe("Its positional arguments, each passed as one quoted word"),
    env: z
      .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string())
      .optional()
      .describe("Environment for the script. Never a secret: inputs are stored in the state"),
    stdin: z
      .literal("apiKey")
      .optional()
      .describe("Feed the resource's (secret) apiKey input to the script on standard input"),
  })
  .strict();
export type RepairStep = z.infer<typeof repairStepSchema>;
export type RepairStepInput = z.input<typeof repairStepSchema>;

export const repairsSchema = z
  .array(repairStepSchema)
  .default([])
  .describe(
    "Ordered repair steps; update runs, in this order, each step one of whose fields drifted (onDrift: repair)",
  );
