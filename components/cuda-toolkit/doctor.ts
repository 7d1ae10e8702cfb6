// CudaToolkit's checks on this machine, without Pulumi (`gpuhost doctor`, cli/doctor.ts). CUDA is resolved the way FlashInfer's get_cuda_path() does
// (CUDA_HOME, CUDA_PATH, dirname of `which nvcc`, /usr/local/cuda) and every missing piece is
// reported with the package that provides it. Then the toolkit found compiles the same proof
// program CudaToolkit's verify.sh does (proof/curand_cublas.cu), so the compiler itself has the
// last word; it runs only where there are GPUs. `root` inspects a simulated host folder instead of /.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { packageProviding, requiredFiles, type Toolkit, toolkit, toolkitReleases } from "../cuda-catalog/catalog";
import { proofSource } from "./plan";
import { toolkitIssues } from "../../physics/preflight";
import { P2P_FLOOR_GBPS, probeTopology, type TopologyReport } from "./topology-probe";
import { errorLine, nvidiaSmi, processOutput, withCompiled } from "./cuda-program";

export interface DoctorFinding {
  /** What is wrong, e.g. "missing include/curand.h". */
  problem: string;
  /** The package that provides what is missing, when one does. */
  package?: string;
  /** A command or step that fixes it. */
  fix?: string;
}

/** What the proof program did. Never "ran" unless it ran. */
export interface DoctorProof {
  status: "ran" | "compiled" | "compile-failed" | "run-failed" | "skipped";
  /** One line: the program's output, the compiler's first error, or why it did not run. */
  detail: string;
}

export interface DoctorReport {
  healthy: boolean;
  /** The CUDA folder FlashInfer would use, and which rule found it. */
  cudaHome: string | null;
  resolvedBy: "--cuda-home" | "CUDA_HOME" | "CUDA_PATH" | "nvcc on PATH" | "/usr/local/cuda" | null;
  /** What each lookup rule points at (disagreements are how the story's (docs/story.md) 12.8 trap hides). */
  candidates: { rule: string; path: string | null }[];
  release: string | null;
  nvccVersion: string | null;
  usrLocalCuda: string | null;
  gpus: { driver: string; computeCapability: string }[];
  proof: DoctorProof;
  /** The GPUs' PCIe links, topology and (with `p2p`) peer-to-peer bandwidth (topology-probe.ts). */
  topology: TopologyReport;
  problems: DoctorFinding[];
  warnings: string[];
}

export interface DoctorOptions {
  cudaHome?: string;
  expectRelease: string;
  env: NodeJS.ProcessEnv;
  /** Folder standing for / (the simulated host); "" for the real machine. */
  root: string;
  /** Compile (and on GPUs run) the proof program with the toolkit found; default true. */
  proof?: boolean;
  /** Measure peer-to-peer bandwidth between the GPUs (a program compiled with the toolkit's nvcc); default false. */
  p2p?: boolean;
  /** GB/s below which a peer-to-peer copy is a problem (default P2P_FLOOR_GBPS). */
  p2pFloorGBps?: number;
}

const PROOF_RUN_TIMEOUT_MS = 120_000;

/**
 * Compiles proof/curand_cublas.cu with <home>/bin/nvcc the way verify.sh does, and runs it only
 * where GPUs were found (or when the simulated host's stand-in nvcc made a script). A compile
 * failure names the package providing the missing header or library.
 */
function runProof(
  root: string,
  home: string,
  release: string,
  nvccVersion: string | null,
  gpuCount: number,
  env: NodeJS.ProcessEnv,
): { proof: DoctorProof; finding?: DoctorFinding & { missingPath?: string } } {
  const nvcc = onHost(root, path.posix.join(home, "bin", "nvcc"));
  if (!fs.existsSync(nvcc)) return { proof: { status: "skipped", detail: "not compiled: no nvcc" } };
  const program = {
    nvcc,
    name: "proof",
    source: proofSource(),
    linkArgs: ["-lcurand", "-lcublas"],
    env,
    libDir: onHost(root, path.posix.join(home, "lib64")),
  };
  return withCompiled(program, (c): ReturnType<typeof runProof> => {
    if (c.compileError !== null) {
      const first = errorLine(c.compileError);
      const header = /fatal error: ([^:]+): No such file or directory/.exec(first)?.[1];
      const lib = /cannot find -l(\S+)/.exec(first)?.[1];
      const missing = header ? `include/${header}` : lib ? `lib64/lib${lib}.so` : undefined;
      const pkg = missing ? packageProviding(missing, release) : undefined;
      const where = missing && pkg ? ` (${path.posix.join(home, missing)} is provided by package ${pkg})` : "";
      return {
        proof: { status: "compile-failed", detail: `not compiled: ${first}${where}` },
        finding: {
          problem: `the proof program does not compile: ${first}`,
          package: pkg,
          fix: pkg && `apt-get install ${pkg}`,
          missingPath: missing && path.posix.join(home, missing),
        },
      };
    }
    const standin = fs.readFileSync(c.binary).subarray(0, 2).toString() === "#!";
    const version = nvccVersion?.replace(/^V/, "") ?? "unknown";
    if (gpuCount === 0 && !standin) {
      return { proof: { status: "compiled", detail: `compiled and linked with nvcc ${version}; not run: no GPU` } };
    }
    try {
      const out = c.run(PROOF_RUN_TIMEOUT_MS);
      return { proof: { status: "ran", detail: `ran: ${out.trim().replace(/\n/g, " ")}` } };
    } catch (err) {
      const out = processOutput(err).trim().replace(/\n/g, " ");
      return {
        proof: { status: "run-failed", detail: `compiled, failed when run: ${out}` },
        finding: { problem: `the proof program compiled but failed when run: ${out}` },
      };
    }
  });
}

const onHost = (root: string, p: string) => (root ? path.join(root, p) : p);
const fromHost = (root: string, p: string) => (root && p.startsWith(`${root}/`) ? p.slice(root.length) : p);

function realOnHost(root: string, p: string): string | null {
  try {
    return fromHost(root, fs.realpathSync(onHost(root, p)));
  } catch {
    return null;
  }
}

function whichNvcc(root: string, env: NodeJS.ProcessEnv): string | null {
  for (const dir of (env.PATH ?? "").split(":").filter(Boolean)) {
    // On a simulated host, PATH entries are host paths; the shims' own folder is not one.
    const candidate = root && !dir.startsWith(`${root}/`) ? path.join(root, dir, "nvcc") : path.join(dir, "nvcc");
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return fromHost(root, candidate);
    } catch {
      /* next */
    }
  }
  return null;
}

function nvccRelease(root: string, home: string): { release: string | null; version: string | null } {
  const nvcc = onHost(root, path.posix.join(home, "bin", "nvcc"));
  if (!fs.existsSync(nvcc)) return { release: null, version: null };
  try {
    const out = execFileSync(nvcc, ["--version"], { encoding: "utf8", timeout: 10_000 });
    const m = /release ([0-9.]+), (V[0-9.]+)/.exec(out);
    return { release: m?.[1] ?? null, version: m?.[2] ?? null };
  } catch {
    return { release: null, version: null };
  }
}

function gpus(env: NodeJS.ProcessEnv): { driver: string; computeCapability: string }[] {
  return nvidiaSmi(["--query-gpu=driver_version,compute_cap", "--format=csv,noheader"], env)
    .split("\n")
    .filter((l) => l.includes(","))
    .map((l) => {
      const [driver, cap] = l.split(",").map((s) => s.trim());
      return { driver: driver, computeCapability: cap };
    });
}

const olderThan = (a: string, b: string) => {
  const [x, y] = [a, b].map((v) => v.split(".").map(Number));
  return x[0] < y[0] || (x[0] === y[0] && (x[1] ?? 0) < (y[1] ?? 0));
};

type Candidate = DoctorReport["candidates"][number];

/** Looks the toolkit up by FlashInfer's rules, then checks its release, files, GPUs, proof and topology. */
export function doctor(opts: DoctorOptions): DoctorReport {
  const { root, env } = opts;
  const candidates = lookupCandidates(opts);
  const chosen = candidates.find((c) => c.path !== null);
  const report = emptyReport(candidates, chosen, realOnHost(root, "/usr/local/cuda"), gpus(env));
  const expected = toolkit(opts.expectRelease);
  if (!chosen?.path) {
    report.problems.push(
      installToolkit(
        "no CUDA toolkit found (CUDA_HOME, CUDA_PATH, nvcc on PATH and /usr/local/cuda are all unset or absent)",
        expected,
      ),
    );
    return report;
  }
  const home = chosen.path;
  const real = realOnHost(root, home);
  report.warnings.push(...lookupDisagreement(root, candidates));
  const { release, version } = nvccRelease(root, home);
  report.release = release;
  report.nvccVersion = version;
  if (!real) {
    report.problems.push(installToolkit(`${home} (found by ${chosen.rule}) does not exist`, expected));
    return report;
  }
  // Which described toolkit is this? By its real folder, else by nvcc's release.
  const tk = describedToolkit(real, release) ?? expected;
  report.problems.push(...releaseProblems(home, chosen.rule, real, release, expected));
  report.problems.push(...missingFiles(root, home, tk));
  if (report.usrLocalCuda && report.usrLocalCuda !== real)
    report.warnings.push(
      `/usr/local/cuda points at ${report.usrLocalCuda}, not ${real}: tools that assume /usr/local/cuda will use another toolkit`,
    );
  report.problems.push(...gpuProblems(report.gpus, release, expected));
  proofPhase(opts, home, tk.release, version, report);
  topologyPhase(opts, home, release, report);
  report.healthy = report.problems.length === 0;
  return report;
}

/** What each of FlashInfer's lookup rules points at, in its order (--cuda-home first when given). */
function lookupCandidates(opts: DoctorOptions): Candidate[] {
  const { root, env } = opts;
  const which = whichNvcc(root, env);
  return [
    ...(opts.cudaHome ? [{ rule: "--cuda-home", path: opts.cudaHome }] : []),
    { rule: "CUDA_HOME", path: env.CUDA_HOME || null },
    { rule: "CUDA_PATH", path: env.CUDA_PATH || null },
    { rule: "nvcc on PATH", path: which ? path.posix.dirname(path.posix.dirname(which)) : null },
    { rule: "/usr/local/cuda", path: fs.existsSync(onHost(root, "/usr/local/cuda")) ? "/usr/local/cuda" : null },
  ];
}

/** The report before any check: unhealthy, nothing compiled, no topology. */
function emptyReport(
  candidates: Candidate[],
  chosen: Candidate | undefined,
  usrLocalCuda: string | null,
  found: DoctorReport["gpus"],
): DoctorReport {
  return {
    healthy: false,
    cudaHome: chosen?.path ?? null,
    resolvedBy: (chosen?.rule as DoctorReport["resolvedBy"]) ?? null,
    candidates,
    release: null,
    nvccVersion: null,
    usrLocalCuda,
    gpus: found,
    proof: { status: "skipped", detail: "not compiled" },
    topology: {
      links: [],
      pairs: [],
      p2p: { status: "not run", detail: "not run: no toolkit found", pairs: [] },
      notes: [],
      problems: [],
    },
    problems: [],
    warnings: [],
  };
}

const installToolkit = (problem: string, expected: Toolkit): DoctorFinding => ({
  problem,
  package: expected.meta,
  fix: `apt-get install ${expected.meta}`,
});

/** Rules that lead to different real folders are how the 12.8 trap hides: a warning naming each. */
function lookupDisagreement(root: string, candidates: Candidate[]): string[] {
  const distinct = new Set(candidates.map((c) => (c.path ? realOnHost(root, c.path) : null)).filter(Boolean));
  if (distinct.size <= 1) return [];
  return [
    `the CUDA lookup rules disagree: ${candidates
      .filter((c) => c.path)
      .map((c) => `${c.rule} -> ${realOnHost(root, c.path!) ?? c.path}`)
      .join(", ")}`,
  ];
}

function describedToolkit(real: string, release: string | null): Toolkit | undefined {
  return (
    toolkitReleases()
      .map(toolkit)
      .find((t) => t.root === real) ?? (release && toolkitReleases().includes(release) ? toolkit(release) : undefined)
  );
}

/** No working nvcc, or one of another release than the stack expects. */
function releaseProblems(
  home: string,
  rule: string,
  real: string,
  release: string | null,
  expected: Toolkit,
): DoctorFinding[] {
  if (release === null) {
    const p = requiredFiles(expected.release).find((f) => f.path.endsWith("/bin/nvcc"));
    return [
      {
        problem: `no working nvcc at ${path.posix.join(home, "bin/nvcc")}`,
        package: p?.package,
        fix: p && `apt-get install ${p.package}`,
      },
    ];
  }
  if (release === expected.release) return [];
  return [
    {
      problem: `CUDA found by ${rule} (${real}) is release ${release}, expected ${expected.release}`,
      package: expected.meta,
      fix: `apt-get install ${expected.meta} && update-alternatives --set cuda ${expected.root} (or set CUDA_HOME=${expected.root})`,
    },
  ];
}

/** Required files, relative to the toolkit root, looked up in the folder actually found. */
function missingFiles(root: string, home: string, tk: Toolkit): DoctorFinding[] {
  return requiredFiles(tk.release).flatMap((f) => {
    const rel = path.posix.relative(tk.root, f.path);
    if (fs.existsSync(onHost(root, path.posix.join(home, rel)))) return [];
    return [
      {
        problem: `missing ${path.posix.join(home, rel)}`,
        package: f.package,
        fix: `apt-get install --reinstall ${f.package}`,
      },
    ];
  });
}

function gpuProblems(found: DoctorReport["gpus"], release: string | null, expected: Toolkit): DoctorFinding[] {
  const problems: DoctorFinding[] = [];
  for (const [i, g] of found.entries()) {
    // The typed rules of physics/preflight.ts (each with its source), the ones preview applies to gpus.computeCapability.
    for (const issue of release ? toolkitIssues(release, g.computeCapability) : [])
      problems.push({ problem: `GPU ${i}: ${issue}`, package: expected.meta });
    if (Number(g.driver.split(".")[0]) < 580 && release && !olderThan(release, "13.0")) {
      problems.push({
        problem: `GPU ${i}: driver ${g.driver} is older than the R580 branch CUDA ${release} needs`,
        fix: "install an R580 (or newer) NVIDIA driver",
      });
    }
  }
  return problems;
}

function proofPhase(
  opts: DoctorOptions,
  home: string,
  release: string,
  nvccVersion: string | null,
  report: DoctorReport,
): void {
  if (opts.proof === false) {
    report.proof = { status: "skipped", detail: "not compiled (--no-proof)" };
    return;
  }
  if (report.release === null) return;
  const { proof, finding } = runProof(opts.root, home, release, nvccVersion, report.gpus.length, opts.env);
  report.proof = proof;
  // A missing file already reported above is not reported twice; the compiler's line is in `proof`.
  const known = finding?.missingPath && report.problems.some((p) => p.problem === `missing ${finding.missingPath}`);
  if (finding && !known) {
    const { missingPath: _unused, ...rest } = finding;
    report.problems.push(rest);
  }
}

/** The GPUs' links and topology; peer-to-peer bandwidth only with a working nvcc to build its program. */
function topologyPhase(opts: DoctorOptions, home: string, release: string | null, report: DoctorReport): void {
  const { root } = opts;
  const nvcc = onHost(root, path.posix.join(home, "bin", "nvcc"));
  report.topology = probeTopology({
    gpuCount: report.gpus.length,
    nvcc: release !== null && fs.existsSync(nvcc) ? nvcc : null,
    libDir: onHost(root, path.posix.join(home, "lib64")),
    env: opts.env,
    p2p: opts.p2p === true,
    floorGBps: opts.p2pFloorGBps ?? P2P_FLOOR_GBPS,
  });
  report.problems.push(...report.topology.problems.map((problem) => ({ problem })));
}
