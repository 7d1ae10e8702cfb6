// The stand-in nvcc behaves as the real one does for what gpuhost checks: --version lines, the
// missing-header fatal error, the missing-library link error, and a runnable output otherwise.
import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { standinNvcc } from "../../sim-host/standin";

let tk: string;
let nvcc: string;
beforeAll(() => {
  tk = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-nvcc-"));
  for (const d of ["bin", "include", "lib64", "work"]) fs.mkdirSync(path.join(tk, d));
  nvcc = path.join(tk, "bin/nvcc");
  fs.writeFileSync(nvcc, standinNvcc("13.0"), { mode: 0o755 });
  fs.writeFileSync(
    path.join(tk, "work/prog.cu"),
    '#include <cstdio>\n#include <stdio.h>\n#include <cuda_runtime.h>\n  #include <curand.h>\n#include "local.h"\nint main() {}\n',
  );
  fs.writeFileSync(path.join(tk, "work/local.h"), "\n");
  fs.writeFileSync(path.join(tk, "include/cuda_runtime.h"), "\n");
});
afterAll(() => fs.rmSync(tk, { recursive: true, force: true }));
const run = (...args: string[]) => spawnSync(nvcc, args, { cwd: path.join(tk, "work"), encoding: "utf8" });

describe("stand-in nvcc", () => {
  it("prints --version exactly like NVIDIA's", () => {
    expect(execFileSync(nvcc, ["--version"], { encoding: "utf8" })).toBe(
      "nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\nBuilt on Wed_Aug_20_01:58:59_PM_PDT_2025\n" +
        "Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0\n",
    );
  });

  it("fails on a header missing from its toolkit with the real message", () => {
    const r = run("-o", "prog", "prog.cu", "-lcurand");
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(
      "prog.cu:4:12: fatal error: curand.h: No such file or directory\n    4 |   #include <curand.h>\ncompilation terminated.\n",
    );
    expect(fs.existsSync(path.join(tk, "work/prog"))).toBe(false);
  });

  it("finds headers in -I folders, then fails linking a missing library", () => {
    fs.mkdirSync(path.join(tk, "extra"), { recursive: true });
    fs.writeFileSync(path.join(tk, "extra/curand.h"), "\n");
    const r = run("-I", path.join(tk, "extra"), "-o", "prog", "prog.cu", "-lcurand");
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("cannot find -lcurand: No such file or directory");
  });

  it("writes a runnable output when everything resolves", () => {
    fs.writeFileSync(path.join(tk, "include/curand.h"), "\n");
    fs.writeFileSync(path.join(tk, "lib64/libcurand.so"), "\n");
    const r = run("-arch=sm_120", "-O2", "-o", "prog", "prog.cu", "-lcurand");
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(execFileSync(path.join(tk, "work/prog"), { encoding: "utf8" })).toMatch(
      /^gpuhost stand-in binary: prog\.cu compiled against .* \(release 13\.0\); no GPU code ran\n$/,
    );
  });

  it("fails without input files as nvcc does", () => {
    expect(run("-O2").stderr).toContain("nvcc fatal   : No input files specified");
  });
});
