// `gpuhost doctor`: the toolkit checks of components/cuda-toolkit/doctor.ts on this machine, the
// proof program included (compiled and linked with the toolkit found; run only where there are GPUs).
import * as path from "node:path";
import { servingRelease, toolkitReleases } from "../components/cuda-catalog/catalog";
import { doctor, type DoctorReport } from "../components/cuda-toolkit/doctor";
import { P2P_FLOOR_GBPS, type TopologyReport } from "../components/cuda-toolkit/topology-probe";
import { defaultIo, EXIT, runCommand, UsageError, type CliIo } from "./common";
import type { CommandSpec } from "./options";

function render(r: DoctorReport): string {
  const lines = [
    `CUDA home: ${r.cudaHome ?? "(none)"}${r.resolvedBy ? ` (found by ${r.resolvedBy})` : ""}`,
    `release: ${r.release ?? "unknown"}${r.nvccVersion ? ` (nvcc ${r.nvccVersion})` : ""}`,
    `/usr/local/cuda -> ${r.usrLocalCuda ?? "(absent)"}`,
    `proof: ${r.proof.detail}`,
    `GPUs: ${r.gpus.length === 0 ? "none found (no nvidia-smi)" : r.gpus.map((g) => `sm_${g.computeCapability} driver ${g.driver}`).join(", ")}`,
    ...topologyLines(r.topology),
    ...r.warnings.map((w) => `warning: ${w}`),
    ...r.problems.map(
      (p) =>
        `problem: ${p.problem}${p.package ? `, provided by package ${p.package}` : ""}${p.fix ? ` (fix: ${p.fix})` : ""}`,
    ),
    r.healthy ? "healthy" : `${r.problems.length} problem(s)`,
  ];
  return `${lines.join("\n")}\n`;
}

/** The links, the topology's GPU pairs, and the peer-to-peer result (or why it did not run). */
function topologyLines(t: TopologyReport): string[] {
  const links = t.links.map(
    (l) => `GPU ${l.index} PCIe gen ${l.gen ?? "?"}/${l.genMax ?? "?"} x${l.width ?? "?"}/x${l.widthMax ?? "?"}`,
  );
  const pairs = t.pairs.map((p) => `GPU ${p.a}-${p.b} ${p.link}`);
  const p2p = t.p2p.pairs.map((p) =>
    p.notMeasured
      ? `GPU ${p.a}->${p.b} ${p.notMeasured}`
      : `GPU ${p.a}->${p.b} write ${p.writeGBps?.toFixed(1)} read ${p.readGBps?.toFixed(1)} GB/s`,
  );
  return [
    ...(links.length > 0 ? [`PCIe: ${links.join(", ")}`] : []),
    ...(pairs.length > 0 ? [`topology: ${pairs.join(", ")}`] : []),
    `peer-to-peer: ${t.p2p.detail}${p2p.length > 0 ? `: ${p2p.join(", ")}` : ""}`,
    ...t.notes.map((n) => `note: ${n}`),
  ];
}

export const DOCTOR = {
  name: "doctor",
  about:
    "The toolkit checks of components/cuda-toolkit/doctor.ts on this machine, the way FlashInfer finds the toolkit, and the proof program compiled and linked with it (run only where there are GPUs).",
  flags: {
    "cuda-home": {
      type: "path",
      value: "PATH",
      description: "the toolkit to check (default: found as FlashInfer finds it)",
    },
    "expect-release": {
      type: "string",
      value: "R",
      description: "the CUDA release expected (default: cuda.yaml's serving release)",
      default: servingRelease(),
    },
    root: {
      type: "path",
      value: "DIR",
      description: "inspect a simulated host's folder instead of / (or GPUHOST_ROOT)",
    },
    "no-proof": { type: "boolean", description: "skip compiling and linking the proof program" },
    p2p: {
      type: "boolean",
      description:
        "also measure peer-to-peer copy bandwidth between every pair of GPUs (a program compiled with the toolkit's nvcc; 256 MiB on each GPU: run it before a service holds them)",
    },
    "p2p-floor": {
      type: "number",
      value: "GBPS",
      max: 10_000,
      description: `peer-to-peer GB/s below which a pair is a problem (default ${P2P_FLOOR_GBPS})`,
    },
    json: { type: "boolean", description: "print the report as JSON" },
  },
  exits: [
    [EXIT.ok, "healthy"],
    [EXIT.failed, "problems found"],
    [EXIT.usage, "usage"],
  ],
} as const satisfies CommandSpec;

export function doctorMain(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  io: CliIo = defaultIo(),
): Promise<number> {
  return runCommand(DOCTOR, argv, io, async (values) => {
    const expectRelease = values["expect-release"];
    if (!toolkitReleases().includes(expectRelease))
      throw new UsageError(`unknown release ${expectRelease} (known: ${toolkitReleases().join(", ")})`);
    const root = values.root ?? env.GPUHOST_ROOT ?? "";
    const report = doctor({
      cudaHome: values["cuda-home"],
      expectRelease,
      env,
      root: root ? path.resolve(root) : "",
      proof: values["no-proof"] !== true,
      p2p: values.p2p === true,
      p2pFloorGBps: values["p2p-floor"],
    });
    io.stdout.write(values.json ? `${JSON.stringify(report, null, 2)}\n` : render(report));
    return report.healthy ? EXIT.ok : EXIT.failed;
  });
}
