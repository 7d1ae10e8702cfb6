// Issue 28.4: the GPUs' links as gpuhost doctor reads them. The parsers are fed nvidia-smi's outputs
// as recorded on a real NVIDIA H200 (docs/real-gpu.md, 2026-12-04, byte for byte: tabs and colour
// codes). Outputs of more than one GPU were not recorded anywhere gpuhost ran: those below are
// WRITTEN in the tool's format (named so), as is the peer-to-peer program's output beyond the
// one-GPU line the H200 printed. doctor itself runs with a FAKE nvidia-smi answering those outputs
// (no GPU on these machines) on a simulated host provisioned by the real scripts.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { doctorMain } from "../../cli/doctor";
import { doctor } from "../../components/cuda-toolkit/doctor";
import { cudaToolkitOptionsSchema } from "../../components/cuda-toolkit/options";
import { toolkitPlan } from "../../components/cuda-toolkit/plan";
import {
  linkFindings,
  P2P_FLOOR_GBPS,
  p2pFindings,
  p2pResult,
  parseP2p,
  parsePcieLinks,
  parseTopology,
  PCIE_QUERY_FIELDS,
  topologyFromVerify,
} from "../../components/cuda-toolkit/topology";
import { execOnHost } from "../../components/host/exec";
import { parseKeyValues, readScript } from "../../components/host/script";
import { prepareSimulatedHost, SIM_REPO_URL, simShimDir, simulatedConnection } from "../../sim-host/platform";

/** Recorded on the H200: `nvidia-smi --query-gpu=<PCIE_QUERY_FIELDS> --format=csv` (header included). */
const H200_PCIE =
  "index, name, pcie.link.gen.current, pcie.link.gen.max, pcie.link.width.current, pcie.link.width.max\n0, NVIDIA H200, 5, 5, 16, 16\n";
/** Recorded on the H200: `nvidia-smi topo -m`, colour codes and tabs as printed. */
const H200_TOPO =
  "\t\u001b[4mGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\u001b[0m\nGPU0\t X \t0-15\t0\t\tN/A\n\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n  NV#  = Connection traversing a bonded set of # NVLinks\n";
/** Printed by proof/p2p_bandwidth.cu on the H200 (one GPU). */
const H200_P2P = "p2p: not run: 1 GPU(s)\n";

/** WRITTEN in nvidia-smi's format: four GPUs, two per PCIe switch, the switches on two NUMA nodes. */
const FOUR_GPU_TOPO = [
  "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID",
  "GPU0\t X \tPIX\tSYS\tSYS\t0-31\t0\t\tN/A",
  "GPU1\tPIX\t X \tSYS\tSYS\t0-31\t0\t\tN/A",
  "GPU2\tSYS\tSYS\t X \tNV4\t32-63\t1\t\tN/A",
  "GPU3\tSYS\tSYS\tNV4\t X \t32-63\t1\t\tN/A",
  "",
].join("\n");

describe("nvidia-smi's PCIe links", () => {
  it("the H200's link, recorded: gen 5 of 5, x16 of x16, nothing to say", () => {
    const links = parsePcieLinks(H200_PCIE);
    expect(links).toEqual([{ index: 0, name: "NVIDIA H200", gen: 5, genMax: 5, width: 16, widthMax: 16 }]);
    expect(linkFindings(links)).toEqual({ problems: [], notes: [] });
  });

  it("a link trained narrower than its slot is a problem; an idle link's lower generation only a note", () => {
    // WRITTEN: the same GPU behind a riser that trained x8, idle at gen 1.
    const links = parsePcieLinks("0, NVIDIA H200, 1, 5, 8, 16\n1, NVIDIA H200, [N/A], [N/A], [N/A], [N/A]\n");
    expect(links[1]).toMatchObject({ gen: null, genMax: null, width: null, widthMax: null });
    const f = linkFindings(links);
    expect(f.problems).toEqual([
      "GPU 0 (NVIDIA H200): PCIe link x8 of x16: trained narrower than the slot allows (a riser, the slot or its bifurcation setting); half or less of its host bandwidth",
    ]);
    expect(f.notes).toEqual(["GPU 0: PCIe gen 1 of 5 now (an idle GPU trains its link down; read it under load)"]);
  });
});

describe("nvidia-smi topo -m", () => {
  it("the H200's matrix, recorded: one GPU, no pair", () => {
    expect(parseTopology(H200_TOPO)).toEqual({ gpus: [0], pairs: [] });
  });

  it("each pair once, with its link: a PCIe switch, across NUMA nodes, NVLink", () => {
    expect(parseTopology(FOUR_GPU_TOPO).pairs).toEqual([
      { a: 0, b: 1, link: "PIX", kind: "PIX" },
      { a: 0, b: 2, link: "SYS", kind: "SYS" },
      { a: 0, b: 3, link: "SYS", kind: "SYS" },
      { a: 1, b: 2, link: "SYS", kind: "SYS" },
      { a: 1, b: 3, link: "SYS", kind: "SYS" },
      { a: 2, b: 3, link: "NV4", kind: "NV" },
    ]);
    expect(parseTopology("nvidia-smi: command not found\n")).toEqual({ gpus: [], pairs: [] });
  });
});

describe("the peer-to-peer program's output", () => {
  it("one GPU, as the H200 printed it: not run", () => {
    expect(parseP2p(H200_P2P)).toEqual({ pairs: [], notRun: "1 GPU(s)" });
  });

  it("a pair below the floor is named with its link; a refused pair is not measured, not slow", () => {
    // WRITTEN: the published collapse across PCIe switches (writes of about 6 GB/s beside about 52).
    const out = "p2p 0 1 write 52.3 read 51.8\np2p 0 2 write 6.1 read 24.9\np2p 2 0 no-peer-access\n";
    const { pairs, notRun } = parseP2p(out);
    expect(notRun).toBeNull();
    expect(pairs).toHaveLength(3);
    expect(pairs[2]).toMatchObject({ a: 2, b: 0, writeGBps: null, readGBps: null });
    expect(pairs[2].notMeasured).toMatch(/^no peer access/);
    expect(p2pFindings(pairs, 10, parseTopology(FOUR_GPU_TOPO).pairs)).toEqual([
      "GPU 0 -> GPU 2: peer-to-peer write 6.1 GB/s, below the floor of 10 GB/s (linked SYS by nvidia-smi topo -m): tensor parallelism across this pair waits on it",
    ]);
    expect(p2pFindings(pairs, 5, [])).toEqual([]);
  });

  it("a program that measured no pair failed, with its own error line; one GPU is not a failure", () => {
    expect(p2pResult("p2p: error: cudaMalloc: out of memory\n")).toEqual({
      status: "failed",
      detail: "measured no pair: p2p: error: cudaMalloc: out of memory",
      pairs: [],
    });
    expect(p2pResult("")).toMatchObject({ status: "failed", detail: "measured no pair: no output" });
    expect(p2pResult(H200_P2P)).toEqual({ status: "not run", detail: "not run: 1 GPU(s)", pairs: [] });
  });
});

/**
 * A FAKE nvidia-smi in BIN answering the given outputs: the PCIe query, `topo -m`, the compute apps
 * (nothing by default) and, for any other query, the GPUs' driver and compute capability.
 */
function writeFakeSmi(bin: string, o: { pcie: string; topo: string; gpus: string; computeApps?: string }): void {
  fs.writeFileSync(path.join(bin, "pcie.txt"), o.pcie);
  fs.writeFileSync(path.join(bin, "topo.txt"), o.topo);
  fs.writeFileSync(path.join(bin, "apps.txt"), o.computeApps ?? "");
  fs.writeFileSync(path.join(bin, "gpus.txt"), o.gpus);
  fs.writeFileSync(
    path.join(bin, "nvidia-smi"),
    [
      "#!/bin/sh",
      'case "$*" in',
      `  *pcie.link*) cat '${bin}/pcie.txt' ;;`,
      `  "topo -m") cat '${bin}/topo.txt' ;;`,
      `  *query-compute-apps*) cat '${bin}/apps.txt' ;;`,
      `  *) cat '${bin}/gpus.txt' ;;`,
      "esac",
      "",
    ].join("\n"),
    { mode: 0o755 },
  );
}

describe("gpuhost doctor's topology (FAKE nvidia-smi answering the H200's recorded outputs)", () => {
  const roots: string[] = [];
  let root = "";
  let bin = "";
  beforeAll(async () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-topology-"));
    bin = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-fake-smi-"));
    roots.push(root, bin);
    prepareSimulatedHost(root);
    const plan = toolkitPlan(cudaToolkitOptionsSchema.parse({ repository: { url: SIM_REPO_URL, trust: "trusted" } }));
    for (const step of [plan.repository, plan.install])
      expect((await execOnHost(simulatedConnection(root), readScript(step.script).text, step.args)).code).toBe(0);
    const noHeader = H200_PCIE.split("\n").slice(1).join("\n");
    writeFakeSmi(bin, { pcie: noHeader, topo: H200_TOPO, gpus: "580.159.04, 9.0\n" });
  });
  afterAll(() => roots.forEach((r) => fs.rmSync(r, { recursive: true, force: true })));

  it("one GPU: its link and the matrix read, peer-to-peer not run, no problem", () => {
    const r = doctor({ expectRelease: "13.0", env: { PATH: `${bin}:/usr/bin:/bin` }, root, p2p: true });
    expect(r.topology).toMatchObject({
      links: [{ index: 0, name: "NVIDIA H200", gen: 5, genMax: 5, width: 16, widthMax: 16 }],
      pairs: [],
      p2p: { status: "not run", detail: "not run: 1 GPU, no pair" },
      problems: [],
    });
  });

  it("no GPU: nothing runs, and the report says so", async () => {
    const r = doctor({ expectRelease: "13.0", env: { PATH: "/usr/bin:/bin" }, root, p2p: true });
    expect(r.topology).toMatchObject({ links: [], pairs: [], p2p: { status: "not run", detail: "not run: no GPU" } });
    let out = "";
    const io = {
      stdout: { write: (t: string) => ((out += t), true) },
      stderr: { write: () => true },
    } as unknown as Parameters<typeof doctorMain>[2];
    await doctorMain(["--root", root, "--no-proof"], { PATH: "/usr/bin:/bin" }, io);
    expect(out).toMatch(/^peer-to-peer: not run: no GPU$/m);
    await doctorMain(["--root", root, "--no-proof"], { PATH: `${bin}:/usr/bin:/bin` }, io);
    expect(out).toMatch(/^PCIe: GPU 0 PCIe gen 5\/5 x16\/x16$/m);
    expect(out).toMatch(/^peer-to-peer: not run: 1 GPU, no pair$/m);
  });
});

describe("the stack's verify step reports the links (issue 28.4; FAKE nvidia-smi, the simulated host's stand-in nvcc)", () => {
  let root = "";
  let bin = "";
  const plan = toolkitPlan(cudaToolkitOptionsSchema.parse({ repository: { url: SIM_REPO_URL, trust: "trusted" } }));
  /** A fake nvidia-smi answering WRITTEN outputs: two GPUs behind one PCIe switch, GPU 1's link trained x8; the given compute apps. */
  const fakeSmi = (computeApps: string) =>
    writeFakeSmi(bin, {
      pcie: "0, NVIDIA H200, 5, 5, 16, 16\n1, NVIDIA H200, 5, 5, 8, 16\n",
      topo: "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tPIX\t0-31\t0\t\tN/A\nGPU1\tPIX\t X \t0-31\t0\t\tN/A\n",
      gpus: "580.159.04, 9.0\n580.159.04, 9.0\n",
      computeApps,
    });
  const verify = async (withSmi: boolean) => {
    // As gpu-checks.test.ts runs it: the simulated root, the fake nvidia-smi first on PATH (or none).
    const r = await execOnHost({ kind: "local" }, readScript(plan.verify.script).text, plan.verify.args, {
      environment: {
        GPUHOST_ROOT: root,
        PATH: `${withSmi ? `${bin}:` : ""}${simShimDir()}:/usr/bin:/bin`,
      },
    });
    expect(r.code, r.stderr).toBe(0);
    return topologyFromVerify(parseKeyValues(r.stdout), P2P_FLOOR_GBPS);
  };
  beforeAll(async () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-topology-verify-"));
    bin = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-fake-smi-"));
    prepareSimulatedHost(root);
    for (const step of [plan.repository, plan.install])
      expect((await execOnHost(simulatedConnection(root), readScript(step.script).text, step.args)).code).toBe(0);
  });
  afterAll(() => [root, bin].forEach((r) => fs.rmSync(r, { recursive: true, force: true })));

  it("the H200's verify.sh lines, RECORDED (docs/real-gpu.md): its link and matrix read, one GPU, no pair, no problem", () => {
    const recorded = fs.readFileSync(path.join(__dirname, "fixtures", "h200-verify-topology.txt"), "utf8");
    expect(topologyFromVerify(parseKeyValues(recorded), P2P_FLOOR_GBPS)).toEqual({
      links: [{ index: 0, name: "NVIDIA H200", gen: 5, genMax: 5, width: 16, widthMax: 16 }],
      pairs: [],
      p2p: { status: "not run", detail: "not run: 1 GPU, no pair", pairs: [] },
      notes: [],
      problems: [],
    });
  });

  it("no GPU: nothing runs, and the report says so", async () => {
    expect(await verify(false)).toEqual({
      links: [],
      pairs: [],
      p2p: { status: "not run", detail: "not run: no GPU", pairs: [] },
      notes: [],
      problems: [],
    });
  });

  it("two idle GPUs: the links and the matrix read, the narrow link a problem, the P2P program compiled with the toolkit's nvcc and run", async () => {
    fakeSmi("");
    const t = await verify(true);
    expect(t.links.map((l) => l.width)).toEqual([16, 8]);
    expect(t.pairs).toEqual([{ a: 0, b: 1, link: "PIX", kind: "PIX" }]);
    // The stand-in nvcc builds a script that measures nothing: said, never counted as measured.
    expect(t.p2p.status).toBe("failed");
    expect(t.p2p.detail).toMatch(/^measured no pair: .*stand-in/);
    expect(t.problems).toEqual([
      expect.stringMatching(/^GPU 1 \(NVIDIA H200\): PCIe link x8 of x16/),
      expect.stringMatching(/^the peer-to-peer test measured no pair: /),
    ]);
  });

  it("a process holding GPU memory (a running service): the P2P test is not run, and says why", async () => {
    fakeSmi("4242\n");
    expect((await verify(true)).p2p).toEqual({
      status: "not run",
      detail: "not run: 1 process(es) hold GPU memory (a running service): the test would disturb them",
      pairs: [],
    });
  });
});

describe("ops/gpu-host-check.sh", () => {
  it("asks nvidia-smi for the PCIe fields the stack's verify step asks for", () => {
    const script = fs.readFileSync(path.join(__dirname, "..", "..", "ops", "gpu-host-check.sh"), "utf8");
    expect(script).toContain(`pcie_query="${PCIE_QUERY_FIELDS.join(",")}"`);
  });
});
