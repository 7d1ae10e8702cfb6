// The GPUs' links as the host reports them (issue 28.4): each GPU's PCIe link (generation and width,
// current against the most it can train to), the topology matrix of `nvidia-smi topo -m` (NVLink, a
// PCIe switch, a host bridge, across NUMA nodes), and peer-to-peer copy bandwidth measured by a
// program compiled with the toolkit's own nvcc (proof/p2p_bandwidth.cu). A published host pattern
// is why: on 8 RTX PRO 6000 behind two PCIe switches, writes between GPUs on different switches
// fell from about 52 to about 6 GB/s, and tensor parallelism over them with it; nothing on the
// serving side says so. The parsers read the tools' outputs as recorded on real machines
// (docs/real-gpu.md); what they find is reported by `gpuhost doctor` and by the stack's verify step
// (the host output `topology`).
import { z } from "zod";

/** The nvidia-smi query of each GPU's PCIe link. */
export const PCIE_QUERY_FIELDS = [
  "index",
  "name",
  "pcie.link.gen.current",
  "pcie.link.gen.max",
  "pcie.link.width.current",
  "pcie.link.width.max",
] as const;

/** One GPU's PCIe link. Figures are null where the driver reports [N/A] (a virtual function, an unsupported board). */
const PcieLinkSchema = z.object({
  index: z.number(),
  name: z.string(),
  gen: z.number().nullable(),
  genMax: z.number().nullable(),
  width: z.number().nullable(),
  widthMax: z.number().nullable(),
});
export type PcieLink = z.infer<typeof PcieLinkSchema>;

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
const LINK_KINDS = ["NV", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC", "other"] as const;
export type LinkKind = (typeof LINK_KINDS)[number];

const GpuPairSchema = z.object({
  a: z.number(),
  b: z.number(),
  /** The matrix's own word (NV12, PIX, SYS, ...). */
  link: z.string(),
  kind: z.enum(LINK_KINDS),
});
export type GpuPair = z.infer<typeof GpuPairSchema>;

/** The matrix's words taken as they are (NV<n> is NVLink; anything else is "other"). */
const KINDS = LINK_KINDS.filter((k) => k !== "NV" && k !== "other");

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
const P2pPairSchema = z.object({
  a: z.number(),
  b: z.number(),
  /** a's copy into b's memory (the direction tensor parallelism's all-reduce writes). */
  writeGBps: z.number().nullable(),
  /** a's copy out of b's memory. */
  readGBps: z.number().nullable(),
  /** Why not measured (no peer access between them). */
  notMeasured: z.string().nullable(),
});
export type P2pPair = z.infer<typeof P2pPairSchema>;

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

/**
 * Below this many GB/s a peer-to-peer copy is a problem by default: PCIe 4.0 x16 between two GPUs
 * moves about 25, 5.0 x16 about 50; the published collapse across PCIe switches was to about 6.
 */
export const P2P_FLOOR_GBPS = 10;

const P2pSchema = z.object({
  status: z.enum(["measured", "not run", "failed"]),
  detail: z.string(),
  pairs: z.array(P2pPairSchema),
});

export const TopologyReportSchema = z
  .object({
    links: z.array(PcieLinkSchema),
    pairs: z.array(GpuPairSchema),
    p2p: P2pSchema,
    notes: z.array(z.string()).describe("What is worth knowing and proves nothing (an idle link's generation)"),
    problems: z.array(z.string()).describe("A link trained narrower than its slot, a GPU pair below the P2P floor"),
  })
  .describe("The GPUs' PCIe links, `nvidia-smi topo -m` and the peer-to-peer test, with what they show");
export type TopologyReport = z.infer<typeof TopologyReportSchema>;

/**
 * The report from what the tools printed, wherever they ran: `gpuhost doctor` on this machine
 * (topology-probe.ts), the stack's verify step on the host (verify.sh prints the same outputs).
 */
export function topologyReport(
  o: { gpuCount: number; pcie: string; matrix: string; p2p: TopologyReport["p2p"] },
  floorGBps: number,
): TopologyReport {
  const links = parsePcieLinks(o.pcie);
  const { pairs } = parseTopology(o.matrix);
  const { problems, notes } = linkFindings(links);
  if (o.p2p.status === "measured") problems.push(...p2pFindings(o.p2p.pairs, floorGBps, pairs));
  if (o.p2p.status === "failed") problems.push(`the peer-to-peer test ${o.p2p.detail}`);
  return { links, pairs, p2p: o.p2p, notes, problems };
}

/** A peer-to-peer result that did not run, and why. */
export const p2pNotRun = (why: string): TopologyReport["p2p"] => ({
  status: "not run",
  detail: `not run: ${why}`,
  pairs: [],
});

/** proof/p2p_bandwidth.cu's output, as a result. */
export function p2pResult(output: string): TopologyReport["p2p"] {
  const parsed = parseP2p(output);
  if (parsed.notRun) return p2pNotRun(parsed.notRun);
  // A program that measured no pair said why (its `p2p: error:` line), or is not the one it should be.
  if (parsed.pairs.length === 0) {
    const lines = output.split("\n").map((l) => l.trim());
    const why = lines.find((l) => l.startsWith("p2p: error:")) ?? lines.find((l) => l !== "") ?? "no output";
    return { status: "failed", detail: `measured no pair: ${why}`, pairs: [] };
  }
  return {
    status: "measured",
    detail: `${parsed.pairs.length} ordered pairs measured (256 MiB copies with peer access)`,
    pairs: parsed.pairs,
  };
}

/**
 * What verify.sh printed of the links on the host (base64 of each tool's output; see its step 7):
 * gpus, topology_pcie, topology_matrix, and topology_p2p (the program's output) or
 * topology_p2p_failed (why it did not compile or run) or topology_p2p_skipped (why it was not run).
 */
export function topologyFromVerify(keys: Readonly<Record<string, string>>, floorGBps: number): TopologyReport {
  const text = (k: string) => Buffer.from(keys[k] ?? "", "base64").toString("utf8");
  const gpuCount = Number(keys.gpus ?? "0");
  const p2p =
    gpuCount === 0
      ? p2pNotRun("no GPU")
      : gpuCount < 2
        ? p2pNotRun(`${gpuCount} GPU, no pair`)
        : keys.topology_p2p_failed !== undefined
          ? { status: "failed" as const, detail: keys.topology_p2p_failed, pairs: [] }
          : keys.topology_p2p_skipped !== undefined
            ? p2pNotRun(keys.topology_p2p_skipped)
            : p2pResult(text("topology_p2p"));
  return topologyReport({ gpuCount, pcie: text("topology_pcie"), matrix: text("topology_matrix"), p2p }, floorGBps);
}
