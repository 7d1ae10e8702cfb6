// The GPUs' links on this machine, for `gpuhost doctor` (issue 28.4): nvidia-smi's PCIe query and
// topology matrix, and with --p2p the peer-to-peer program compiled with the toolkit's own nvcc and
// run. Every call is bounded; without a GPU nothing runs and the report says so.
import * as fs from "node:fs";
import * as path from "node:path";
import { componentDir } from "./plan";
import { errorLine, nvidiaSmi, processOutput, withCompiled } from "./cuda-program";
import {
  type GpuPair,
  linkFindings,
  type P2pPair,
  p2pFindings,
  parseP2p,
  parsePcieLinks,
  parseTopology,
  PCIE_QUERY_FIELDS,
  type PcieLink,
} from "./topology";

/**
 * Below this many GB/s a peer-to-peer copy is a problem: PCIe 4.0 x16 between two GPUs moves about
 * 25, 5.0 x16 about 50; the published collapse across PCIe switches was to about 6.
 */
export const P2P_FLOOR_GBPS = 10;

export interface TopologyReport {
  links: PcieLink[];
  pairs: GpuPair[];
  p2p: { status: "measured" | "not run" | "failed"; detail: string; pairs: P2pPair[] };
  /** What is worth knowing and proves nothing (an idle link's generation). */
  notes: string[];
  problems: string[];
}

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
  const notRun = (why: string) => ({ status: "not run" as const, detail: `not run: ${why}`, pairs: [] });
  if (o.gpuCount === 0) return { links: [], pairs: [], p2p: notRun("no GPU"), notes: [], problems: [] };
  const smi = (args: string[]) => nvidiaSmi(args, o.env);
  const links = parsePcieLinks(smi([`--query-gpu=${PCIE_QUERY_FIELDS.join(",")}`, "--format=csv,noheader"]));
  const { pairs } = parseTopology(smi(["topo", "-m"]));
  const { problems, notes } = linkFindings(links);
  const report: TopologyReport = { links, pairs, p2p: notRun(""), notes, problems };
  if (o.gpuCount < 2) report.p2p = notRun(`${o.gpuCount} GPU, no pair`);
  else if (!o.p2p)
    report.p2p = notRun(
      "--p2p not given (it allocates 256 MiB on each GPU and loads every link: run it before a service holds them)",
    );
  else if (!o.nvcc) report.p2p = { status: "failed", detail: "not compiled: no nvcc", pairs: [] };
  else report.p2p = measureP2p(o.nvcc, o.libDir, o.env);
  if (report.p2p.status === "measured") problems.push(...p2pFindings(report.p2p.pairs, o.floorGBps, pairs));
  if (report.p2p.status === "failed") problems.push(`the peer-to-peer test ${report.p2p.detail}`);
  return report;
}

/** Compiles proof/p2p_bandwidth.cu with NVCC and runs it; its lines parsed by topology.ts. */
function measureP2p(nvcc: string, libDir: string | null, env: NodeJS.ProcessEnv): TopologyReport["p2p"] {
  const source = fs.readFileSync(path.join(componentDir(), "proof", "p2p_bandwidth.cu"), "utf8");
  return withCompiled({ nvcc, name: "p2p", source, env, libDir }, (c): TopologyReport["p2p"] => {
    if (c.compileError !== null)
      return { status: "failed", detail: `did not compile: ${errorLine(c.compileError)}`, pairs: [] };
    let out: string;
    try {
      out = c.run(P2P_RUN_TIMEOUT_MS);
    } catch (err) {
      return { status: "failed", detail: `failed when run: ${errorLine(processOutput(err))}`, pairs: [] };
    }
    const parsed = parseP2p(out);
    if (parsed.notRun) return { status: "not run", detail: `not run: ${parsed.notRun}`, pairs: [] };
    return {
      status: "measured",
      detail: `${parsed.pairs.length} ordered pairs measured (256 MiB copies with peer access)`,
      pairs: parsed.pairs,
    };
  });
}
