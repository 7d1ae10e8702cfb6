// probe.sh on its own: shellcheck-clean, usage errors, JSON that survives hostile paths, its
// hasher (openssl, else sha256sum), and the parser's refusals.
import { execFileSync, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
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

  it("hashes with openssl where it gives the right digest, else with sha256sum: the same digests", () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-probe-"));
    try {
      const files = { "/lib/big.so": Buffer.alloc(3_000_000, 7), "/inc/a.h": Buffer.from("#pragma once\n") };
      for (const [f, body] of Object.entries(files)) {
        fs.mkdirSync(path.join(root, path.dirname(f)), { recursive: true });
        fs.writeFileSync(path.join(root, f), body);
      }
      const want = Object.fromEntries(
        Object.entries(files).map(([f, body]) => [f, createHash("sha256").update(body).digest("hex")]),
      );
      const log = path.join(root, "openssl-calls");
      /** The probe with `openssl` first on PATH being BODY (sh), each call logged. */
      const probeWith = (body: string) => {
        const bin = fs.mkdtempSync(path.join(root, "bin-"));
        fs.writeFileSync(path.join(bin, "openssl"), `#!/bin/sh\necho call >>"${log}"\n${body}\n`, { mode: 0o755 });
        fs.rmSync(log, { force: true });
        const args = [
          probeScriptPath(),
          "--cuda-home",
          "/nowhere",
          ...Object.keys(files).flatMap((f) => ["--file", f]),
        ];
        const out = execFileSync("bash", args, {
          env: { ...process.env, GPUHOST_ROOT: root, PATH: `${bin}:/usr/bin:/bin` },
        }).toString();
        const calls = fs.existsSync(log) ? fs.readFileSync(log, "utf8").split("\n").filter(Boolean).length : 0;
        return { files: parseProbeOutput(out).files, calls };
      };
      // The real openssl behind the logging wrapper: the self-check, then one call a file.
      const real = probeWith('exec /usr/bin/openssl "$@"');
      expect(real.files).toEqual(want);
      expect(real.calls).toBe(1 + Object.keys(files).length);
      // An openssl that answers a wrong digest, or fails: asked once, and sha256sum hashes.
      for (const liar of ["echo 0000 '*stdin'", "exit 127"]) {
        const r = probeWith(liar);
        expect(r.files, liar).toEqual(want);
        expect(r.calls, liar).toBe(1);
      }
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it("asks systemctl once for all units, and each unit alone when the lines do not pair with the units", () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-probe-"));
    try {
      const units = ["a.service", "b.service", "c.service"];
      fs.mkdirSync(path.join(root, "etc/systemd/system"), { recursive: true });
      for (const u of units) fs.writeFileSync(path.join(root, "etc/systemd/system", u), `[Unit]\nDescription=${u}\n`);
      const log = path.join(root, "systemctl-calls");
      /**
       * The probe with a `systemctl` that answers as systemctl(1) does (b is enabled and active, the
       * others disabled and inactive; is-enabled prints no line for a unit file that is gone), each
       * call logged; EXTRA is printed first on stdout (a systemctl that says more than asked).
       */
      const probeWith = (extra = "") => {
        const bin = fs.mkdtempSync(path.join(root, "bin-"));
        const script = `#!/bin/bash
echo "$*" >>"${log}"
${extra}
sub=$1; shift
for u in "$@"; do
  case $sub in
    is-enabled)
      if [[ ! -f "$GPUHOST_ROOT/etc/systemd/system/$u" ]]; then echo "Failed to get unit file state for $u" >&2; continue; fi
      [[ $u == b.service ]] && echo enabled || echo disabled ;;
    is-active) [[ $u == b.service ]] && echo active || echo inactive ;;
  esac
done
exit 3\n`;
        fs.writeFileSync(path.join(bin, "systemctl"), script, { mode: 0o755 });
        fs.rmSync(log, { force: true });
        const args = [
          probeScriptPath(),
          "--cuda-home",
          "/nowhere",
          ...units.flatMap((u) => ["--unit", `/etc/systemd/system/${u}`]),
        ];
        const out = execFileSync("bash", args, {
          env: { ...process.env, GPUHOST_ROOT: root, PATH: `${bin}:/usr/bin:/bin` },
        }).toString();
        const answers = Object.fromEntries(
          Object.values(parseProbeOutput(out).units).map((s) => [s.name, `${s.enabled}/${s.active}`]),
        );
        return { answers, calls: fs.readFileSync(log, "utf8").trim().split("\n") };
      };
      const clean = probeWith();
      expect(clean.answers).toEqual({
        "a.service": "disabled/inactive",
        "b.service": "enabled/active",
        "c.service": "disabled/inactive",
      });
      expect(clean.calls).toEqual([`is-enabled ${units.join(" ")}`, `is-active ${units.join(" ")}`]);
      // a's file gone: is-enabled prints two lines for three units, so each unit is asked alone.
      fs.rmSync(path.join(root, "etc/systemd/system/a.service"));
      const gone = probeWith();
      expect(gone.answers).toEqual({
        "a.service": "/inactive",
        "b.service": "enabled/active",
        "c.service": "disabled/inactive",
      });
      expect(gone.calls).toEqual([
        `is-enabled ${units.join(" ")}`,
        ...units.map((u) => `is-enabled ${u}`),
        `is-active ${units.join(" ")}`,
      ]);
      // A systemctl that prints a line more than asked when asked for several: never paired wrongly.
      fs.writeFileSync(path.join(root, "etc/systemd/system/a.service"), "[Unit]\n");
      const chatty = probeWith("(($# > 2)) && echo 'Warning: the unit files changed on disk'");
      expect(chatty.answers).toEqual(clean.answers);
      expect(chatty.calls).toEqual([
        `is-enabled ${units.join(" ")}`,
        ...units.map((u) => `is-enabled ${u}`),
        `is-active ${units.join(" ")}`,
        ...units.map((u) => `is-active ${u}`),
      ]);
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
