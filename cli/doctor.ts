// `gpuhost doctor [--cuda-home PATH] [--expect-release 13.0] [--root DIR] [--no-proof] [--json]`: the
// toolkit checks of components/cuda-toolkit/doctor.ts on this machine, the proof program included.
// Exit 0 healthy, 1 problems, 2 usage error. `--root DIR` (or GPUHOST_ROOT) inspects a simulated
// host folder instead of /.
import * as path from "node:path";
import { toolkitReleases } from "../components/cuda-catalog/catalog";
import { doctor, type DoctorReport } from "../components/cuda-toolkit/doctor";

function render(r: DoctorReport): string {
  const lines = [
    `CUDA home: ${r.cudaHome ?? "(none)"}${r.resolvedBy ? ` (found by ${r.resolvedBy})` : ""}`,
    `release: ${r.release ?? "unknown"}${r.nvccVersion ? ` (nvcc ${r.nvccVersion})` : ""}`,
    `/usr/local/cuda -> ${r.usrLocalCuda ?? "(absent)"}`,
    `proof: ${r.proof.detail}`,
    `GPUs: ${r.gpus.length === 0 ? "none found (no nvidia-smi)" : r.gpus.map((g) => `sm_${g.computeCapability} driver ${g.driver}`).join(", ")}`,
    ...r.warnings.map((w) => `warning: ${w}`),
    ...r.problems.map(
      (p) =>
        `problem: ${p.problem}${p.package ? `, provided by package ${p.package}` : ""}${p.fix ? ` (fix: ${p.fix})` : ""}`,
    ),
    r.healthy ? "healthy" : `${r.problems.length} problem(s)`,
  ];
  return `${lines.join("\n")}\n`;
}

const USAGE = "usage: gpuhost doctor [--cuda-home PATH] [--expect-release 13.0] [--root DIR] [--no-proof] [--json]";

export async function doctorMain(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let cudaHome: string | undefined;
  let expectRelease = "13.0";
  let root = env.GPUHOST_ROOT ?? "";
  let json = false;
  let proof = true;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    try {
      if (a === "--cuda-home") cudaHome = value();
      else if (a === "--expect-release") expectRelease = value();
      else if (a === "--root") root = value();
      else if (a === "--json") json = true;
      else if (a === "--no-proof") proof = false;
      else if (a === "-h" || a === "--help") {
        process.stdout.write(`${USAGE}\n`);
        return 0;
      } else throw new Error(`unknown argument ${a}`);
    } catch (e) {
      process.stderr.write(`gpuhost doctor: ${(e as Error).message}\n${USAGE}\n`);
      return 2;
    }
  }
  if (!toolkitReleases().includes(expectRelease)) {
    process.stderr.write(`gpuhost doctor: unknown release ${expectRelease} (known: ${toolkitReleases().join(", ")})\n`);
    return 2;
  }
  const report = doctor({ cudaHome, expectRelease, env, root: root ? path.resolve(root) : "", proof });
  process.stdout.write(json ? `${JSON.stringify(report, null, 2)}\n` : render(report));
  return report.healthy ? 0 : 1;
}
