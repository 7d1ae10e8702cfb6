// Every knob of CudaToolkit, with its default and description: the stack config schema
// (stack/config.ts) embeds this, and the component applies it. No Pulumi import.
import { z } from "zod";
import { servingRelease, toolkitReleases } from "../cuda-catalog/catalog";
import { P2P_FLOOR_GBPS } from "./topology";
import { URL_MAX_CHARS, VERSION_MAX_CHARS, atMostChars } from "../text-bounds";

/** NVIDIA's repository for a distribution/architecture (the default when no mirror is configured). */
export function defaultRepositoryUrl(distribution: string, architecture: string): string {
  return `https://developer.download.nvidia.com/compute/cuda/repos/${distribution}/${architecture}/`;
}

// https only (file:// for a repository on the host itself): over http:// anyone on the path can swap
// the keyring or the packages apt installs as root.
const urlSchema = z
  .string()
  .max(URL_MAX_CHARS, atMostChars(URL_MAX_CHARS))
  .refine(
    (u) => !/^http:\/\//i.test(u),
    "must be https:// (or file:// for a repository on the host): http:// is refused",
  )
  .regex(/^(https|file):\/\/[A-Za-z0-9._~:/?#@!$&()*+,;=%-]+$/, "must be an https:// or file:// URL")
  .refine((u) => !/['"`\s\\]/.test(u), "must not contain quotes, spaces or backslashes");

const isFileUrl = (u: string | undefined) => u !== undefined && u.startsWith("file://");

export const cudaRepositorySchema = z
  .object({
    distribution: z
      .string()
      .max(VERSION_MAX_CHARS, atMostChars(VERSION_MAX_CHARS))
      .regex(/^[a-z0-9]+$/, "like debian12, ubuntu2204, ubuntu2404")
      .default("debian12")
      .describe("NVIDIA repository distribution: debian12, ubuntu2204, ubuntu2404"),
    architecture: z
      .enum(["x86_64", "sbsa"])
      .default("x86_64")
      .describe("NVIDIA repository architecture: x86_64 or sbsa (arm64 servers)"),
    url: urlSchema
      .optional()
      .describe(
        "Repository URL (the folder holding Packages); default NVIDIA's for distribution/architecture. The test host uses its local repository",
      ),
    trust: z
      .enum(["keyring", "trusted"])
      .default("keyring")
      .describe(
        "keyring: install the cuda-keyring package and sign the source with it; trusted: [trusted=yes], allowed only for a file:// repository on the host",
      ),
    keyringUrl: urlSchema
      .optional()
      .describe("Where the cuda-keyring .deb is fetched from; default <url>cuda-keyring_1.1-1_all.deb"),
    keyringSha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/, "must be 64 lowercase hex digits (sha256sum's output)")
      .optional()
      .describe(
        "sha256 of the cuda-keyring .deb, checked before `dpkg -i`. Required for an https:// keyring: unset, `up` refuses and prints the sha256 it downloaded, to pin after checking it",
      ),
  })
  .strict()
  .superRefine((r, ctx) => {
    if (r.trust === "trusted" && !isFileUrl(r.url))
      ctx.addIssue({
        code: "custom",
        path: ["trust"],
        message:
          "'trusted' ([trusted=yes], no signature check) is allowed only for a file:// repository on the host; use 'keyring' for a remote one",
      });
  });

export const cudaToolkitOptionsSchema = z
  .object({
    release: z
      .string()
      .regex(/^[0-9]+\.[0-9]+$/, { message: "must be a release number such as 13.0", abort: true })
      // Checked here, not when the toolkit is planned: there an unknown release was a bare Error
      // (a stack trace) instead of one sentence naming gpuhost:toolkit.release.
      .refine((r) => toolkitReleases().includes(r), {
        error: (issue) =>
          `${String(issue.input)} is not a CUDA release of components/cuda-catalog/cuda.yaml (it holds: ${toolkitReleases().join(", ")})`,
      })
      .default(() => servingRelease())
      .describe(
        "CUDA release; must be a toolkit in components/cuda-catalog/cuda.yaml (default: its `serving` release)",
      ),
    repository: cudaRepositorySchema.prefault({}),
    minDriverBranch: z
      .number()
      .int()
      .min(400)
      .default(580)
      .describe("Oldest driver branch accepted where GPUs exist (R580 supports CUDA 13.x)"),
    proofByExecution: z
      .boolean()
      .default(true)
      .describe("Compile (and where GPUs exist, run) a curand+cublas program during verification"),
    peerToPeerFloorGBps: z
      .number()
      .positive()
      .default(P2P_FLOOR_GBPS)
      .describe(
        "Where GPUs exist and two or more of them are idle, verification measures peer-to-peer copies between every pair; a pair below this many GB/s is a problem in the host output `topology` (PCIe 5.0 x16 moves about 50, a cross-switch collapse about 6)",
      ),
    removeOnDestroy: z
      .boolean()
      .default(false)
      .describe("Remove the toolkit packages and the /usr/local/cuda alternative on `pulumi destroy`"),
  })
  .strict();

export type CudaToolkitOptions = z.infer<typeof cudaToolkitOptionsSchema>;
export type CudaToolkitOptionsInput = z.input<typeof cudaToolkitOptionsSchema>;
