// The GPUs' links on this machine, for `gpuhost doctor` (issue 28.4): nvidia-smi's PCIe query and
// topology matrix, and with --p2p the peer-to-peer program compiled with the toolkit's own nvcc and
// run. Every call is bounded; without a GPU nothing runs and the report says so.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { componentDir } from "./plan";
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

const SMI_TIMEOUT_MS = 15_000;
const P2P_COMPILE_TIMEOUT_MS = 300_000;
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
  const smi = (args: string[]) => {
    try {
      return execFileSync("nvidia-smi", args, {
        encoding: "utf8",
        timeout: SMI_TIMEOUT_MS,
        env: o.env,
        stdio: ["ignore", "pipe", "ignore"],
      });
    } catch {
      return "";
    }
  };
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
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-p2p-"));
  // nvcc calls the host compiler (gcc) by PATH: the system folders stay reachable whatever PATH is.
  const runEnv = { ...env, PATH: [env.PATH, "/usr/local/bin:/usr/bin:/bin"].filter(Boolean).join(":") };
  try {
    fs.copyFileSync(path.join(componentDir(), "proof", "p2p_bandwidth.cu"), path.join(work, "p2p.cu"));
    try {
      execFileSync(nvcc, ["-o", "p2p", "p2p.cu"], {
        cwd: work,
        timeout: P2P_COMPILE_TIMEOUT_MS,
        stdio: ["ignore", "pipe", "pipe"],
        env: runEnv,
      });
    } catch (err) {
      return { status: "failed", detail: `did not compile: ${firstLine(err)}`, pairs: [] };
    }
    let out: string;
    try {
      out = execFileSync(path.join(work, "p2p"), [], {
        encoding: "utf8",
        timeout: P2P_RUN_TIMEOUT_MS,
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...runEnv, LD_LIBRARY_PATH: [libDir, env.LD_LIBRARY_PATH].filter(Boolean).join(":") },
      });
    } catch (err) {
      return { status: "failed", detail: `failed when run: ${firstLine(err)}`, pairs: [] };
    }
    const parsed = parseP2p(out);
    if (parsed.notRun) return { status: "not run", detail: `not run: ${parsed.notRun}`, pairs: [] };
    return {
      status: "measured",
      detail: `${parsed.pairs.length} ordered pairs measured (256 MiB copies with peer access)`,
      pairs: parsed.pairs,
    };
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

function firstLine(err: unknown): string {
  const e = err as { stdout?: Buffer | string; stderr?: Buffer | string; message?: string };
  const text = `${e.stderr?.toString() ?? ""}${e.stdout?.toString() ?? ""}` || (e.message ?? String(err));
  return (
    text
      .split("\n")
      .map((l) => l.trim())
      .find(Boolean) ?? "(no output)"
  );
}
