// probe.sh on its own: shellcheck-clean, usage errors, JSON that survives hostile paths, and the
// parser's refusals.
import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { shellcheckFindings } from "../support/run";
import { parseProbeOutput, probeArgs, probeScriptPath } from "../../components/drift/probe";
import { expectedForSim } from "./sim-host";

describe("probe.sh", () => {
  // shellcheck is Debian's package, as test/host/shellcheck.test.ts requires it: without it this fails.
  it("is shellcheck-clean", async () => {
    expect(await shellcheckFindings([probeScriptPath()])).toBe("");
  });

  it("refuses a missing --cuda-home and unknown arguments (exit 64)", () => {
    expect(spawnSync("bash", [probeScriptPath()]).status).toBe(64);
    expect(spawnSync("bash", [probeScriptPath(), "--cuda-home", "/x", "--bogus"]).status).toBe(64);
  });

  it("prints valid JSON for paths with quotes, backslashes and spaces, and reports a missing file as null", () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-probe-"));
    try {
      const odd = '/opt/we"ird dir\\x/h.h';
      fs.mkdirSync(path.join(root, path.dirname(odd)), { recursive: true });
      fs.writeFileSync(path.join(root, odd), "x\n");
      const out = execFileSync(
        "bash",
        [probeScriptPath(), "--cuda-home", "/nowhere", "--path", "/nowhere/bin", "--file", odd, "--file", "/missing.h"],
        {
          env: { ...process.env, GPUHOST_ROOT: root, PATH: "/usr/bin:/bin" },
        },
      ).toString();
      const observed = parseProbeOutput(out);
      expect(observed.files[odd]).toMatch(/^[0-9a-f]{64}$/);
      expect(observed.files["/missing.h"]).toBeNull();
      expect(observed.cudaHome).toEqual({ dir: "/nowhere", nvcc: null, version: null });
      expect(observed.cudaLink).toBeNull();
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it("takes its file and unit lists from the expected state (the toolkit description)", () => {
    const args = probeArgs(expectedForSim());
    const files = args.flatMap((a, i) => (args[i - 1] === "--file" ? [a] : []));
    expect(files).toEqual(
      expect.arrayContaining([
        "/usr/local/cuda-13.0/include/curand.h",
        "/usr/local/cuda-13.0/include/cublas_v2.h",
        "/usr/local/cuda-13.0/include/cusparse.h",
        "/usr/local/cuda-13.0/lib64/libcurand.so",
      ]),
    );
    expect(args).toContain("--unit");
  });

  it("the parser refuses output that is not the probe's JSON", () => {
    expect(() => parseProbeOutput("bash: line 1: oops")).toThrow(/no valid JSON/);
    expect(() => parseProbeOutput('{"probeFormat":2}')).toThrow(/unexpected shape/);
  });
});
