// Every host script and shim of the host and toolkit layers is shellcheck-clean and strict.
// shellcheck is Debian's package (apt-get install -y shellcheck); without it this test fails.
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { shellcheckFindings } from "../support/run";

const repo = path.resolve(__dirname, "../..");
const scripts = [
  ...fs
    .readdirSync(path.join(repo, "components/cuda-toolkit/scripts"))
    .filter((f) => f.endsWith(".sh"))
    .map((f) => `components/cuda-toolkit/scripts/${f}`),
  ...fs.readdirSync(path.join(repo, "sim-host/bin")).map((f) => `sim-host/bin/${f}`),
  "sim-host/standin/nvcc",
];

describe("host scripts", () => {
  it("finds the scripts it checks", () => {
    expect(scripts).toEqual(
      expect.arrayContaining([
        "components/cuda-toolkit/scripts/install.sh",
        "components/cuda-toolkit/scripts/verify.sh",
        "sim-host/bin/systemctl",
        "sim-host/standin/nvcc",
      ]),
    );
  });

  it("are shellcheck-clean", async () => {
    expect(await shellcheckFindings(scripts, { cwd: repo, bash: true })).toBe("");
  });

  it("start with a bash shebang and set -euo pipefail (the sim-host/bin wrappers too), and are executable", () => {
    for (const s of scripts) {
      const text = fs.readFileSync(path.join(repo, s), "utf8");
      expect(text.startsWith("#!/usr/bin/env bash\n"), s).toBe(true);
      expect(text, s).toMatch(/^set -euo pipefail$/m);
      expect(fs.statSync(path.join(repo, s)).mode & 0o111, `${s} is executable`).not.toBe(0);
    }
  });
});
