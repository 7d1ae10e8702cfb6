// One CUDA release in the serving venv (issue 43.1): the committed hash lock holds every NVIDIA wheel
// versioned by the CUDA release to the toolkit's line, the generator reads that line from the toolkit
// description (never a literal of its own), and a wheel a dependency truly forces onto a newer line
// is named in the lock's header with the requirement and the rule that makes it safe.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { cudaWheels, foreignCudaWheel, servingRelease } from "../../components/cuda-catalog/catalog";
import { checkLockCudaWheels } from "../../components/serving-env/lock";
import { ROOT } from "../config/stacks";

const LOCK = path.join(ROOT, "requirements/sglang-0.5.23.lock.txt");
const CUDA_YAML = path.join(ROOT, "components/cuda-catalog/cuda.yaml");
const GENERATOR = path.join(ROOT, "requirements/lock_from_reports.py");

/** name -> version of every pin in a pip hash lock. */
function pins(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of text.matchAll(/^([a-z0-9][a-z0-9-]*)==(\S+)/gm)) out.set(m[1], m[2]);
  return out;
}

function python(...args: string[]): string {
  const r = spawnSync("python3", [GENERATOR, ...args], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`lock_from_reports.py ${args[0]} failed: ${r.stderr}`);
  return r.stdout;
}

describe("the committed serving lock: one CUDA release", () => {
  const text = fs.readFileSync(LOCK, "utf8");
  const locked = pins(text);

  it("has no NVIDIA CUDA wheel outside the toolkit's line (or outside its declared exception)", () => {
    const foreign = [...locked].map(([n, v]) => foreignCudaWheel(n, v)).filter((s) => s !== undefined);
    expect(foreign).toEqual([]);
    // The wheels the issue found on four releases are there, on the toolkit's.
    for (const n of ["nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-nvvm", "nvidia-nvjitlink", "nvidia-cuda-cccl"])
      expect(locked.get(n)?.startsWith(`${servingRelease()}.`), `${n} ${locked.get(n)}`).toBe(true);
  });

  it("names each newer wheel in its header: the wheel, the requirement that forces it, why it is safe", () => {
    // The header as prose: its comment lines joined (the generator wraps them at 100 columns).
    const header = text.slice(0, text.search(/^[a-z0-9]/m)).replace(/\n#\s*/g, " ");
    expect(header).toContain(`held to the ${servingRelease()} line`);
    for (const [name, w] of Object.entries(cudaWheels().newerWheels)) {
      expect(header).toContain(`Newer by requirement: ${name} ${w.line}.x, forced by ${w.requiredBy}.`);
      expect(header).toMatch(/minor-version compatibility/);
      expect(header).toMatch(/PTX newer than the driver/);
      expect(locked.get(name)?.startsWith(`${w.line}.`)).toBe(true);
    }
  });
});

describe("a hash lock of the stack's own (environment.requirementsLock) is judged the same way, at preview", () => {
  const where = "gpuhost:environment.requirementsLock";

  it("accepts the shipped lock", () => {
    expect(() => checkLockCudaWheels(fs.readFileSync(LOCK, "utf8"), servingRelease(), where)).not.toThrow();
  });

  it("refuses the lock as it was before (nvcc 13.5.37 beside the 13.0 toolkit), naming the key and each wheel", () => {
    // The CUDA lines of the lock issue 43 found, before the constraint (the hashes stand in: only versions are judged).
    const before = [
      "nvidia-cuda-nvcc==13.5.37 \\\n    --hash=sha256:" + "a".repeat(64),
      "nvidia-cuda-runtime==13.0.96 \\\n    --hash=sha256:" + "b".repeat(64),
      "nvidia-nvvm==13.5.37 \\\n    --hash=sha256:" + "c".repeat(64),
      "",
    ].join("\n");
    expect(() => checkLockCudaWheels(before, servingRelease(), where)).toThrow(
      /^gpuhost:environment\.requirementsLock: .*nvidia-cuda-nvcc 13\.5\.37 is of CUDA 13\.5, beside the CUDA 13\.0 toolkit.*nvidia-nvvm 13\.5\.37/,
    );
  });
});

describe("foreignCudaWheel: the one judge of a venv's (or a lock's) CUDA wheel", () => {
  const release = servingRelease();

  it("refuses the wheels the issue found (13.5 nvcc, 13.3 cccl) naming the wheel and both releases", () => {
    expect(foreignCudaWheel("nvidia-cuda-nvcc", "13.5.37")).toBe(
      `nvidia-cuda-nvcc 13.5.37 is of CUDA 13.5, beside the CUDA ${release} toolkit`,
    );
    expect(foreignCudaWheel("nvidia_cuda_cccl", "13.3.5.0.6")).toMatch(
      /^nvidia-cuda-cccl 13\.3\.5\.0\.6 is of CUDA 13\.3/,
    );
  });

  it("accepts the toolkit's line, the wheels with their own numbering, and what is not NVIDIA's", () => {
    expect(foreignCudaWheel("nvidia-cuda-nvcc", `${release}.88`)).toBeUndefined();
    expect(foreignCudaWheel("nvidia-curand", "10.4.0.35")).toBeUndefined();
    expect(foreignCudaWheel("nvidia-ml-py", "13.615.71")).toBeUndefined();
    expect(foreignCudaWheel("torch", "2.14.1")).toBeUndefined();
  });

  it("refuses an NVIDIA wheel nobody classified, so a new one cannot slip past on its own numbering", () => {
    expect(foreignCudaWheel("nvidia-cuda-newthing", "13.9.1")).toMatch(/does not classify/);
  });

  it("holds a declared exception to its declared line only", () => {
    for (const [name, w] of Object.entries(cudaWheels().newerWheels)) {
      expect(foreignCudaWheel(name, `${w.line}.9.9`)).toBeUndefined();
      expect(foreignCudaWheel(name, "13.9.0.1")).toMatch(new RegExp(`not the ${w.line.replace(".", "\\.")} line`));
    }
  });
});

describe("generate-lock.sh's constraints come from the toolkit description", () => {
  it("constrains every release wheel to `serving`'s line and each exception to its own", () => {
    const lines = python("constraints", CUDA_YAML).trim().split("\n");
    expect(lines).toContain(`nvidia-cuda-nvcc==${servingRelease()}.*`);
    for (const [name, w] of Object.entries(cudaWheels().newerWheels)) expect(lines).toContain(`${name}==${w.line}.*`);
    expect(lines).toHaveLength(cudaWheels().releaseWheels.length);
  });

  it("follows the description: another serving release there is another line in the constraints", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-cuda-yaml-"));
    try {
      const other = path.join(dir, "cuda.yaml");
      fs.writeFileSync(other, fs.readFileSync(CUDA_YAML, "utf8").replace(/^serving: .*$/m, 'serving: "12.8"'));
      expect(python("constraints", other)).toContain("nvidia-cuda-nvcc==12.8.*\n");
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
