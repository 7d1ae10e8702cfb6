// THE toolkit description: its facts (NVIDIA's package structure), its helpers, its stand-in
// contents, and its validation.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import {
  allPackages,
  filesOf,
  packageProviding,
  packagesOf,
  parseDescription,
  requiredFiles,
  toolkit,
  trapPackages,
  wheels,
  wheelsOf,
} from "../../components/cuda-catalog/catalog";
import { controlFile, standinContent, standinNvcc, STANDIN_MARKER, writeStandinTrees } from "../../sim-host/standin";

describe("the CUDA 13.0 description", () => {
  it("has NVIDIA's meta package structure", () => {
    const closure = packagesOf("cuda-toolkit-13-0");
    for (const p of [
      "cuda-compiler-13-0",
      "cuda-nvcc-13-0",
      "cuda-libraries-13-0",
      "cuda-libraries-dev-13-0",
      "libcurand-dev-13-0",
      "libcublas-dev-13-0",
      "libcusparse-dev-13-0",
      "cuda-cudart-dev-13-0",
      "cuda-nvml-dev-13-0",
      "cuda-tools-13-0",
    ]) {
      expect(closure).toContain(p);
    }
    expect(closure).not.toContain("cuda-curand-dev-13-0"); // no such package in NVIDIA's repository
    expect(closure.every((p) => p.includes("-13-0"))).toBe(true);
    expect(packagesOf("cuda-libraries-dev-13-0")).toEqual(
      expect.arrayContaining([
        "libcurand-dev-13-0",
        "libcublas-dev-13-0",
        "libcusparse-dev-13-0",
        "cuda-cudart-dev-13-0",
      ]),
    );
  });

  it("the nvcc-only trap has nvcc and cudart but no curand, cublas or cusparse", () => {
    const trap = trapPackages("13.0", "nvcc-only");
    expect(trap).toContain("cuda-nvcc-13-0");
    expect(trap).toContain("cuda-cudart-dev-13-0");
    expect(trap.filter((p) => /curand|cublas|cusparse/.test(p))).toEqual([]);
    const trapFiles = trap.flatMap(filesOf).map((f) => f.path);
    const missing = requiredFiles("13.0")
      .filter((f) => !trapFiles.includes(f.path))
      .map((f) => path.posix.basename(f.path));
    expect(missing.sort()).toEqual([
      "cublas_v2.h",
      "curand.h",
      "cusparse.h",
      "libcublas.so",
      "libcurand.so",
      "libcusparse.so",
    ]);
  });

  it("requiredFiles lists the headers, libraries, nvcc and version.json under /usr/local/cuda-13.0", () => {
    const req = requiredFiles("13.0").map((f) => f.path);
    expect(req).toEqual(
      expect.arrayContaining([
        "/usr/local/cuda-13.0/bin/nvcc",
        "/usr/local/cuda-13.0/include/curand.h",
        "/usr/local/cuda-13.0/include/cublas_v2.h",
        "/usr/local/cuda-13.0/include/cusparse.h",
        "/usr/local/cuda-13.0/include/cuda_runtime.h",
        "/usr/local/cuda-13.0/lib64/libcurand.so",
        "/usr/local/cuda-13.0/lib64/libcublas.so",
        "/usr/local/cuda-13.0/lib64/libcusparse.so",
        "/usr/local/cuda-13.0/lib64/libcudart.so",
        "/usr/local/cuda-13.0/version.json",
      ]),
    );
    expect(req.every((p) => p.startsWith("/usr/local/cuda-13.0/"))).toBe(true);
    expect(requiredFiles("12.8").every((f) => f.path.startsWith("/usr/local/cuda-12.8/"))).toBe(true);
  });

  it("packageProviding answers doctor's 'provided by package Y'", () => {
    expect(packageProviding("/usr/local/cuda-13.0/include/curand.h")).toBe("libcurand-dev-13-0");
    expect(packageProviding("include/cublas_v2.h", "13.0")).toBe("libcublas-dev-13-0");
    expect(packageProviding("lib64/libcusparse.so", "13.0")).toBe("libcusparse-dev-13-0");
    expect(packageProviding("include/curand.h", "12.8")).toBe("libcurand-dev-12-8");
    expect(packageProviding("/usr/local/cuda-13.0/bin/nvcc")).toBe("cuda-nvcc-13-0");
    expect(packageProviding("/etc/passwd")).toBeUndefined();
  });

  it("toolkits carry nvcc's version lines and the alternatives priority", () => {
    expect(toolkit("13.0")).toMatchObject({
      root: "/usr/local/cuda-13.0",
      meta: "cuda-toolkit-13-0",
      nvccRelease: "13.0",
      alternativesPriority: 130,
    });
    expect(toolkit("12.8").meta).toBe("cuda-toolkit-12-8");
    expect(() => toolkit("11.8")).toThrow(/unknown CUDA toolkit 11.8/);
  });
});

describe("stand-in contents", () => {
  it("headers, libraries and version.json carry the stand-in marker; links mirror the real sonames", () => {
    const curand = filesOf("libcurand-dev-13-0");
    const header = standinContent(curand.find((f) => f.path.endsWith("curand.h"))!);
    expect(header).toMatchObject({ kind: "file", mode: 0o644 });
    expect(header.kind === "file" && header.content).toContain(
      `${STANDIN_MARKER}: curand.h from libcurand-dev-13-0 10.4.0.35-1`,
    );
    expect(standinContent(curand.find((f) => f.path.endsWith("libcurand.so"))!)).toEqual({
      kind: "link",
      target: "libcurand.so.10",
    });
    const vj = standinContent(filesOf("cuda-toolkit-13-0-config-common")[0]);
    expect(vj.kind === "file" && (JSON.parse(vj.content) as { cuda: { version: string } }).cuda.version).toBe("13.0.2");
  });

  it("the stand-in nvcc gets each toolkit's version lines", () => {
    expect(standinNvcc("13.0")).toContain('readonly NVCC_VERSION="V13.0.88"');
    expect(standinNvcc("12.8")).toContain('readonly NVCC_RELEASE="12.8"');
    expect(standinNvcc("12.8")).toContain('readonly NVCC_BUILD="cuda_12.8.r12.8/compiler.35583870_0"');
  });

  it("control files name package, version, dependencies", () => {
    expect(controlFile("cuda-libraries-dev-13-0")).toContain(
      "Depends: cuda-cudart-dev-13-0, libcurand-dev-13-0, libcublas-dev-13-0, libcusparse-dev-13-0\n",
    );
    expect(controlFile("cuda-keyring")).toContain("Architecture: all");
    // the test host's packages that hold NVIDIA's files say so, naming the wheel and its version
    expect(controlFile("libcurand-dev-13-0", "amd64", "wheels")).toContain(
      "Description: NVIDIA's libcurand-dev-13-0 files, repackaged by gpuhost from the wheel(s) nvidia-curand 10.4.0.35\n",
    );
    expect(controlFile("libcurand-dev-13-0")).toContain(
      `Description: ${STANDIN_MARKER} for NVIDIA's libcurand-dev-13-0`,
    );
    // a package without wheel files stays a stand-in whatever is asked
    expect(controlFile("cuda-sanitizer-13-0", "amd64", "wheels")).toContain(STANDIN_MARKER);
  });

  it("writeStandinTrees writes dpkg-deb source trees, idempotently", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-trees-"));
    try {
      writeStandinTrees(dir, ["libcurand-dev-13-0", "cuda-nvcc-13-0"]);
      expect(fs.readFileSync(path.join(dir, "libcurand-dev-13-0/DEBIAN/control"), "utf8")).toContain(
        "Package: libcurand-dev-13-0",
      );
      expect(fs.readlinkSync(path.join(dir, "libcurand-dev-13-0/usr/local/cuda-13.0/lib64/libcurand.so"))).toBe(
        "libcurand.so.10",
      );
      const nvcc = path.join(dir, "cuda-nvcc-13-0/usr/local/cuda-13.0/bin/nvcc");
      expect(fs.statSync(nvcc).mode & 0o777).toBe(0o755);
      const mtime = fs.statSync(nvcc).mtimeMs;
      writeStandinTrees(dir, ["libcurand-dev-13-0", "cuda-nvcc-13-0"]);
      expect(fs.statSync(nvcc).mtimeMs).toBe(mtime);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("validation", () => {
  const minimal = (pkgs: string) => `toolkits: {}\npackages:\n${pkgs}`;
  it("names the YAML path of a bad field and unknown dependencies", () => {
    expect(() => parseDescription(minimal("  a-pkg: { version: 'x!' }\n"))).toThrow(
      /packages\.a-pkg\.version: a Debian version/,
    );
    expect(() => parseDescription(minimal("  a-pkg: { version: '1', depends: [ghost] }\n"))).toThrow(
      /a-pkg depends on unknown ghost/,
    );
    expect(() => parseDescription(minimal("  a-pkg: { version: '1', files: [{ path: x }] }\n"))).toThrow(
      /either a kind or a link/,
    );
    expect(() => parseDescription(minimal("  a-pkg: { version: '1', colour: red }\n"))).toThrow(/colour/);
  });

  it("refuses a wheel pin without a full sha256, a path out of the wheel and an unknown wheel", () => {
    const wheel = (sha: string) =>
      `toolkits: {}\nwheels:\n  w: { version: '1.0', sha256: ${sha}, prefix: nvidia/cu13 }\n`;
    expect(() => parseDescription(`${wheel("abc")}packages: {}\n`)).toThrow(/wheels\.w\.sha256: 64 lowercase hex/);
    const sha = "a".repeat(64);
    const pkg = (from: string, name = "w") =>
      `${wheel(sha)}packages:\n  pk: { version: '1', fromWheel: [{ wheel: ${name}, from: ${from}, to: lib64 }] }\n`;
    expect(() => parseDescription(pkg("../etc"))).toThrow(/packages\.pk\.fromWheel\.0\.from: a relative path/);
    expect(() => parseDescription(pkg("lib", "ghost"))).toThrow(/pk takes from unknown wheel ghost/);
    expect(() => parseDescription(pkg("lib"))).toThrow(/pk takes wheel files but names no toolkit/);
  });
});

describe("NVIDIA's wheels behind the test host's packages", () => {
  it("pins the wheels of the issue's versions, nvcc's matching the catalogue's nvcc line", () => {
    const pinned = Object.fromEntries(wheels().map((w) => [w.name, w.version]));
    expect(pinned).toMatchObject({
      "nvidia-cuda-nvcc": "13.0.88",
      "nvidia-cuda-crt": "13.0.88",
      "nvidia-nvvm": "13.0.88",
      "nvidia-cuda-runtime": "13.0.96",
      "nvidia-curand": "10.4.0.35",
      "nvidia-cublas": "13.0.2.14",
      "nvidia-cusparse": "12.6.3.3",
    });
    expect(toolkit("13.0").nvccVersion).toBe(`V${pinned["nvidia-cuda-nvcc"]}`);
  });

  it("every regular file a wheel-built package names lies under one of its fromWheel targets", () => {
    for (const pkg of allPackages().filter((p) => p.fromWheel.length > 0)) {
      for (const f of pkg.files.filter((x) => x.link === undefined)) {
        const covered = pkg.fromWheel.some((w) => f.path === w.to || f.path.startsWith(`${w.to}/`));
        expect(covered, `${pkg.name}: ${f.path}`).toBe(true);
      }
    }
  });

  it("the nvcc-only trap takes nvcc, its headers, nvvm, cudart and cccl from the wheels, no curand/cublas/cusparse", () => {
    const names = wheelsOf(trapPackages("13.0", "nvcc-only")).map((w) => w.name);
    expect(names.sort()).toEqual([
      "nvidia-cuda-cccl",
      "nvidia-cuda-crt",
      "nvidia-cuda-nvcc",
      "nvidia-cuda-runtime",
      "nvidia-nvvm",
    ]);
    expect(wheelsOf(packagesOf("cuda-toolkit-13-0")).length).toBe(wheels().length);
    // the 12.8 toolkit (the story's stale /usr/local/cuda) stays stand-ins
    expect(wheelsOf(packagesOf("cuda-toolkit-12-8"))).toEqual([]);
  });
});
