// THE toolkit description: its facts (NVIDIA's package structure), its helpers, its stand-in
// contents, and its validation.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import {
  filesOf,
  packageProviding,
  packagesOf,
  parseDescription,
  requiredFiles,
  toolkit,
  trapPackages,
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
});
