// The router's host scripts (and the CI script that builds the tests' smg venv) are shellcheck-clean,
// strict and executable; what they do on a host is exercised under the real engine (test/engine/sim-fleet).
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { shellcheckFindings } from "../support/run";

const repo = path.resolve(__dirname, "../..");
const scripts = [
  ...fs
    .readdirSync(path.join(repo, "components/router/scripts"))
    .filter((f) => f.endsWith(".sh"))
    .map((f) => `components/router/scripts/${f}`),
  ".ci/smg.sh",
];

describe("router scripts", () => {
  it("are the ones the Router runs", () =>
    expect(scripts).toEqual(
      expect.arrayContaining([
        "components/router/scripts/install-router.sh",
        "components/router/scripts/configure-router.sh",
        "components/router/scripts/remove-router.sh",
      ]),
    ));

  it("are shellcheck-clean", async () => {
    expect(await shellcheckFindings(scripts, { cwd: repo, bash: true })).toBe("");
  });

  it.each(scripts)("%s: bash shebang, set -euo pipefail, executable", (s) => {
    const text = fs.readFileSync(path.join(repo, s), "utf8");
    expect(text.startsWith("#!/usr/bin/env bash\n")).toBe(true);
    expect(text).toMatch(/^set -euo pipefail$/m);
    expect(fs.statSync(path.join(repo, s)).mode & 0o111).not.toBe(0);
  });

  it("configure-router.sh refuses a stamp that is not a sha256, before touching anything", () => {
    const r = spawnSync(
      "bash",
      [path.join(repo, "components/router/scripts/configure-router.sh"), "e30=", "e30=", "x; rm -rf /"],
      {
        encoding: "utf8",
        env: { PATH: process.env.PATH, GPUHOST_ROOT: "/nonexistent-gpuhost-root" },
      },
    );
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("refusing stamp");
  });

  it.each([
    [["--index-url", "http://mirror/simple/"], "refusing --index-url"],
    [["--extra-index-url", "https://m/simple/ x"], "refusing --extra-index-url"],
    [["--index-url"], "refusing --index-url"],
    [["--trusted-host", "m"], "unknown argument '--trusted-host'"],
  ])("install-router.sh passes pip only an https/file index: %j is refused before anything runs", (extra, why) => {
    const r = spawnSync(
      "bash",
      [path.join(repo, "components/router/scripts/install-router.sh"), "/opt/r/venv", "", "", ...extra],
      { encoding: "utf8", env: { PATH: process.env.PATH, GPUHOST_ROOT: "/nonexistent-gpuhost-root" } },
    );
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(why);
  });

  it("install-router.sh refuses a venv path with '..'", () => {
    const r = spawnSync(
      "bash",
      [path.join(repo, "components/router/scripts/install-router.sh"), "/opt/../etc", "", ""],
      {
        encoding: "utf8",
        env: { PATH: process.env.PATH, GPUHOST_ROOT: "/nonexistent-gpuhost-root" },
      },
    );
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("refusing venv path");
  });
});
