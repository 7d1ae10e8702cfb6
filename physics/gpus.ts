/**
 * The GPUs gpuhost can reason about, each figure with where it comes from. Tensor throughput is the
 * dense figure (NVIDIA's datasheets print "with sparsity", twice the dense rate; the dense half is
 * what a decode step gets). Memory is the datasheet's GB taken as 10^9 bytes, which is a little
 * less than the cards hold: plans made from it err on the side of fewer tokens of KV cache.
 */

/** A figure and the document it was read from. */
export interface Sourced<T> {
  value: T;
  source: string;
}

export interface GpuSpec {
  /** The catalogue key, as `gpuhost plan --gpu` takes it. */
  name: string;
  /** How `nvidia-smi` and stack configs spell it (matched case- and space-insensitively). */
  aliases: readonly string[];
  /** SM version, e.g. "12.0". */
  computeCapability: string;
  memoryGB: Sourced<number>;
  memoryBandwidthGBs: Sourced<number>;
  /** Dense tensor TFLOPS; null where the GPU has no such tensor format. */
  denseTflops: { bf16: Sourced<number>; fp8: Sourced<number>; fp4: Sourced<number | null> };
  interconnect: Sourced<string>;
}

const RTX_PRO_6000 = "NVIDIA RTX PRO 6000 Blackwell datasheet (GTC 2025): 96 GB GDDR7, 512-bit at 28 Gbps";
const RTX_PRO_6000_TENSOR =
  "NVIDIA RTX PRO 6000 Blackwell datasheet: 4,000 AI TOPS FP4 with sparsity = ~2,016 dense FP4, FP8 half of it, BF16 a quarter (~504 TFLOPS dense)";
const H100 = "NVIDIA H100 Tensor Core GPU datasheet, SXM5 column (sparse figures halved)";
const H200 = "NVIDIA H200 Tensor Core GPU datasheet, SXM column (sparse figures halved)";
const B200 = "NVIDIA HGX B200 datasheet, per GPU = the 8-GPU figure / 8 (sparse figures halved)";
const L40S = "NVIDIA L40S datasheet (sparse figures halved)";

function gpu(
  name: string,
  aliases: readonly string[],
  computeCapability: string,
  [memoryGB, bandwidth, bf16, fp8, fp4, interconnect]: [number, number, number, number, number | null, string],
  sources: { memory: string; tensor: string; interconnect: string },
): GpuSpec {
  return {
    name,
    aliases,
    computeCapability,
    memoryGB: { value: memoryGB, source: sources.memory },
    memoryBandwidthGBs: { value: bandwidth, source: sources.memory },
    denseTflops: {
      bf16: { value: bf16, source: sources.tensor },
      fp8: { value: fp8, source: sources.tensor },
      fp4: { value: fp4, source: fp4 === null ? `${sources.tensor}: no FP4 tensor cores` : sources.tensor },
    },
    interconnect: { value: interconnect, source: sources.interconnect },
  };
}

export const GPUS = [
  gpu(
    "rtx-pro-6000-server",
    ["RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000 Server"],
    "12.0",
    [96, 1792, 504, 1008, 2016, "PCIe Gen5 x16 (64 GB/s each way), no NVLink"],
    {
      memory: `${RTX_PRO_6000}; NVIDIA gives the same memory for the Workstation, Max-Q and Server editions`,
      tensor: RTX_PRO_6000_TENSOR,
      interconnect: "NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet: PCIe Gen5 x16, passive, no NVLink",
    },
  ),
  gpu(
    "rtx-pro-6000-workstation",
    ["RTX PRO 6000 Blackwell Workstation Edition", "RTX PRO 6000 Blackwell", "RTX PRO 6000"],
    "12.0",
    [96, 1792, 504, 1008, 2016, "PCIe Gen5 x16 (64 GB/s each way), no NVLink"],
    {
      memory: RTX_PRO_6000,
      tensor: RTX_PRO_6000_TENSOR,
      interconnect: "NVIDIA RTX PRO 6000 Blackwell Workstation Edition datasheet: PCIe Gen5 x16, no NVLink",
    },
  ),
  gpu("h100-sxm", ["H100 SXM", "H100 80GB HBM3", "H100"], "9.0", [80, 3350, 989, 1979, null, "NVLink 4, 900 GB/s"], {
    memory: `${H100}: 80 GB HBM3, 3.35 TB/s`,
    tensor: `${H100}: BF16 1,979 / FP8 3,958 TFLOPS with sparsity`,
    interconnect: `${H100}: NVLink 900 GB/s`,
  }),
  gpu("h200-sxm", ["H200 SXM", "H200"], "9.0", [141, 4800, 989, 1979, null, "NVLink 4, 900 GB/s"], {
    memory: `${H200}: 141 GB HBM3e, 4.8 TB/s`,
    tensor: `${H200}: BF16 1,979 / FP8 3,958 TFLOPS with sparsity`,
    interconnect: `${H200}: NVLink 900 GB/s`,
  }),
  gpu("b200", ["B200", "HGX B200"], "10.0", [180, 8000, 2250, 4500, 9000, "NVLink 5, 1.8 TB/s"], {
    memory: `${B200}: 1,440 GB HBM3e and 64 TB/s for 8 GPUs`,
    tensor: `${B200}: BF16 36 / FP8 72 / FP4 144 PFLOPS with sparsity for 8 GPUs`,
    interconnect: `${B200}: NVLink 5, 1.8 TB/s per GPU`,
  }),
  gpu("l40s", ["L40S"], "8.9", [48, 864, 362, 733, null, "PCIe Gen4 x16 (32 GB/s each way), no NVLink"], {
    memory: `${L40S}: 48 GB GDDR6, 864 GB/s`,
    tensor: `${L40S}: BF16 362 / FP8 733 TFLOPS dense (733 / 1,466 with sparsity)`,
    interconnect: `${L40S}: PCIe Gen4 x16, no NVLink`,
  }),
] as const satisfies readonly GpuSpec[];

export const GPU_NAMES = GPUS.map((g) => g.name);

const squash = (s: string): string =>
  s
    .toLowerCase()
    .replace(/^nvidia\s+/, "")
    .replace(/[\s_-]+/g, "");

/** The catalogue entry for a key or an alias (e.g. the stack's `gpus.model`), or undefined. */
export function findGpu(name: string): GpuSpec | undefined {
  const key = squash(name);
  return GPUS.find((g) => squash(g.name) === key || g.aliases.some((a) => squash(a) === key));
}
