// The GPUs' links as the host reports them (issue 28.4): each GPU's PCIe link (generation and width,
// current against the most it can train to), the topology matrix of `nvidia-smi topo -m` (NVLink, a
// PCIe switch, a host bridge, across NUMA nodes), and peer-to-peer copy bandwidth measured by a
// program compiled with the toolkit's own nvcc (proof/p2p_bandwidth.cu). A published host pattern
// is why: on 8 RTX PRO 6000 behind two PCIe switches, writes between GPUs on different switches
// fell from about 52 to about 6 GB/s, and tensor parallelism over them with it; nothing on the
// serving side says so. The parsers read the tools' outputs as recorded on real machines
// (docs/real-gpu.md); what they find is reported by `gpuhost doctor`.

/** The nvidia-smi query of each GPU's PCIe link. */
export const PCIE_QUERY_FIELDS = [
  "index",
  "name",
  "pcie.link.gen.current",
  "pcie.link.gen.max",
  "pcie.link.width.current",
  "pcie.link.width.max",
] as const;

export interface PcieLink {
  index: number;
  name: string;
  /** Null where the driver reports [N/A] (a virtual function, an unsupported board). */
  gen: number | null;
  genMax: number | null;
  width: number | null;
  widthMax: number | null;
}

/** A figure nvidia-smi printed, or null for its "[N/A]" / "[Not Supported]". */
const figure = (s: string | undefined): number | null => {
  const n = Number((s ?? "").trim());
  return s !== undefined && /^\s*\d+\s*$/.test(s) && Number.isFinite(n) ? n : null;
};

/** `nvidia-smi --query-gpu=<PCIE_QUERY_FIELDS> --format=csv[,noheader]`: one link per GPU. */
export function parsePcieLinks(csv: string): PcieLink[] {
  return csv
    .split("\n")
    .map((l) => l.split(",").map((c) => c.trim()))
    .filter((c) => c.length >= PCIE_QUERY_FIELDS.length && /^\d+$/.test(c[0]))
    .map((c) => ({
      index: Number(c[0]),
      name: c[1],
      gen: figure(c[2]),
      genMax: figure(c[3]),
      width: figure(c[4]),
      widthMax: figure(c[5]),
    }));
}

/**
 * What the links say. A link narrower than its maximum is a problem: width is trained once, at
 * boot, so x8 of x16 is a riser, a slot or a bifurcation setting, and halves what the GPU moves to
 * and from the host. A generation below its maximum is only a note: GPUs train the link down while
 * idle to save power and back up under load, so an idle reading proves nothing either way.
 */
export function linkFindings(links: PcieLink[]): { problems: string[]; notes: string[] } {
  const problems: string[] = [];
  const notes: string[] = [];
  for (const l of links) {
    if (l.width !== null && l.widthMax !== null && l.width < l.widthMax)
      problems.push(
        `GPU ${l.index} (${l.name}): PCIe link x${l.width} of x${l.widthMax}: trained narrower than the slot allows (a riser, the slot or its bifurcation setting); half or less of its host bandwidth`,
      );
    if (l.gen !== null && l.genMax !== null && l.gen < l.genMax)
      notes.push(
        `GPU ${l.index}: PCIe gen ${l.gen} of ${l.genMax} now (an idle GPU trains its link down; read it under load)`,
      );
  }
  return { problems, notes };
}

/** How two GPUs are connected, as `nvidia-smi topo -m` names it. */
export type LinkKind = "NV" | "PIX" | "PXB" | "PHB" | "NODE" | "SYS" | "SOC" | "other";

export interface GpuPair {
  a: number;
  b: number;
  /** The matrix's own word (NV12, PIX, SYS, ...). */
  link: string;
  kind: LinkKind;
}

const KINDS: LinkKind[] = ["PIX", "PXB", "PHB", "NODE", "SYS", "SOC"];

/** `nvidia-smi topo -m`: each pair of GPUs once, with the link between them (colour codes and tabs as it prints them). */
export function parseTopology(text: string): { gpus: number[]; pairs: GpuPair[] } {
  // eslint-disable-next-line no-control-regex
  const lines = text.replace(/\u001b\[[0-9;]*m/g, "").split("\n");
  const header = lines.find((l) => /^\s+GPU\d+/.test(l));
  if (!header) return { gpus: [], pairs: [] };
  const columns = header
    .trim()
    .split("\t")
    .map((c) => c.trim());
  const gpuColumns = columns.filter((c) => /^GPU\d+$/.test(c));
  const gpus = gpuColumns.map((c) => Number(c.slice(3)));
  const pairs: GpuPair[] = [];
  for (const line of lines) {
    const cells = line.split("\t").map((c) => c.trim());
    const row = /^GPU(\d+)$/.exec(cells[0] ?? "");
    if (!row) continue;
    const a = Number(row[1]);
    gpuColumns.forEach((col, i) => {
      const b = Number(col.slice(3));
      const link = cells[i + 1] ?? "";
      if (b <= a || link === "" || link === "X") return;
      const kind: LinkKind = /^NV\d+$/.test(link) ? "NV" : (KINDS.find((k) => k === link) ?? "other");
      pairs.push({ a, b, link, kind });
    });
  }
  return { gpus, pairs };
}

/** One measured direction between two GPUs, in GB/s (10^9 bytes per second). */
export interface P2pPair {
  a: number;
  b: number;
  /** a's copy into b's memory (the direction tensor parallelism's all-reduce writes). */
  writeGBps: number | null;
  /** a's copy out of b's memory. */
  readGBps: number | null;
  /** Why not measured (no peer access between them). */
  notMeasured: string | null;
}

/**
 * proof/p2p_bandwidth.cu's output: `p2p A B write W read R`, `p2p A B no-peer-access`, or one
 * `p2p: not run: N GPU(s)` line.
 */
export function parseP2p(output: string): { pairs: P2pPair[]; notRun: string | null } {
  const pairs: P2pPair[] = [];
  let notRun: string | null = null;
  for (const line of output.split("\n")) {
    const skipped = /^p2p: not run: (.+)$/.exec(line.trim());
    if (skipped) notRun = skipped[1];
    const m = /^p2p (\d+) (\d+) (?:write ([\d.]+) read ([\d.]+)|(no-peer-access))$/.exec(line.trim());
    if (!m) continue;
    pairs.push({
      a: Number(m[1]),
      b: Number(m[2]),
      writeGBps: m[3] === undefined ? null : Number(m[3]),
      readGBps: m[4] === undefined ? null : Number(m[4]),
      notMeasured: m[5] ? "no peer access between them (the driver refuses it on this path)" : null,
    });
  }
  return { pairs, notRun };
}

/** The pairs whose copies fall below FLOOR GB/s, named with the link the topology gives them. */
export function p2pFindings(pairs: P2pPair[], floorGBps: number, topology: GpuPair[]): string[] {
  const linkOf = (a: number, b: number) =>
    topology.find((p) => (p.a === a && p.b === b) || (p.a === b && p.b === a))?.link;
  return pairs.flatMap((p) => {
    const slow = (
      [
        ["write", p.writeGBps],
        ["read", p.readGBps],
      ] as const
    ).filter(([, v]) => v !== null && v < floorGBps);
    if (slow.length === 0) return [];
    const link = linkOf(p.a, p.b);
    return [
      `GPU ${p.a} -> GPU ${p.b}: peer-to-peer ${slow.map(([d, v]) => `${d} ${v!.toFixed(1)} GB/s`).join(", ")}, below the floor of ${floorGBps} GB/s${link ? ` (linked ${link} by nvidia-smi topo -m)` : ""}: tensor parallelism across this pair waits on it`,
    ];
  });
}
