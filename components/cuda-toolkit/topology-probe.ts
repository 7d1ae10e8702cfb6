// The GPUs' links on this machine, for `gpuhost doctor` (issue 28.4): nvidia-smi's PCIe query and
// topology matrix, and with --p2p the peer-to-peer program compiled with the toolkit's own nvcc and
// run. Every call is bounded; without a GPU nothing runs and the report says so.
import * as fs from "node:fs";
import * as path from "node:path";
import { componentDir } from "./plan";
import { errorLine, nvidiaSmi, processOutput, withCompiled } from "./cuda-program";
import {
  P2P_FLOOR_GBPS,
  p2pNotRun,
  p2pResult,
  PCIE_QUERY_FIELDS,
  topologyReport,
  type TopologyReport,
} from "./topology";

export { P2P_FLOOR_GBPS, type TopologyReport };

const P2P_RUN_TIMEOUT_MS = 300_000;

export function probeTopology(o: {
  gpuCount: number;
  /** The toolkit's nvcc on this machine; null when none was found. */
  nvcc: string | null;
  /** The toolkit's lib64 (the program's runtime library). */
  libDir: string | null;
  env: NodeJS.ProcessEnv;
  p2p: boolean;
  floorGBps: number;
}): TopologyReport {
  if (o.gpuCount === 0)
    return topologyReport({ gpuCount: 0, pcie: "", matrix: "", p2p: p2pNotRun("no GPU") }, o.floorGBps);
  const smi = (args: string[]) => nvidiaSmi(args, o.env);
  const pcie = smi([`--query-gpu=${PCIE_QUERY_FIELDS.join(",")}`, "--format=csv,noheader"]);
  const matrix = smi(["topo", "-m"]);
  const p2p =
    o.gpuCount < 2
      ? p2pNotRun(`${o.gpuCount} GPU, no pair`)
      : !o.p2p
        ? p2pNotRun(
            "--p2p not given (it allocates 256 MiB on each GPU and loads every link: run it before a service holds them)",
          )
        : !o.nvcc
          ? { status: "failed" as const, detail: "not compiled: no nvcc", pairs: [] }
          : measureP2p(o.nvcc, o.libDir, o.env);
  return topologyReport({ gpuCount: o.gpuCount, pcie, matrix, p2p }, o.floorGBps);
}

/** Compiles proof/p2p_bandwidth.cu with NVCC and runs it; its lines parsed by topology.ts. */
function measureP2p(nvcc: string, libDir: string | null, env: NodeJS.ProcessEnv): TopologyReport["p2p"] {
  const source = fs.readFileSync(path.join(componentDir(), "proof", "p2p_bandwidth.cu"), "utf8");
  return withCompiled({ nvcc, name: "p2p", source, env, libDir }, (c): TopologyReport["p2p"] => {
    if (c.compileError !== null)
      return { status: "failed", detail: `did not compile: ${errorLine(c.compileError)}`, pairs: [] };
    try {
      return p2pResult(c.run(P2P_RUN_TIMEOUT_MS));
    } catch (err) {
      return { status: "failed", detail: `failed when run: ${errorLine(processOutput(err))}`, pairs: [] };
    }
  });
}
