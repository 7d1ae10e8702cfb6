/**
 * `gpuhost` on a Node.js older than package.json's engines (22) says so in one sentence and exits
 * non-zero, instead of running into whatever breaks first. It needs a Node.js < 22 on this machine
 * (Debian's /usr/bin/node is 20 on the CI machines); where there is none, the test is skipped and
 * says why.
 */
import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { unsupportedNode } from "../../cli/gpuhost";

const repo = path.resolve(__dirname, "../..");

function oldNode(): string | undefined {
  const candidates = ["/usr/bin/node", "/usr/local/bin/node", "/usr/bin/nodejs"];
  for (const c of candidates) {
    if (!fs.existsSync(c)) continue;
    try {
      const major = Number(execFileSync(c, ["-p", "process.versions.node"], { encoding: "utf8" }).split(".")[0]);
      if (major < 22) return c;
    } catch {
      // not a working node
    }
  }
  return undefined;
}

const old = oldNode();

describe("gpuhost on Node.js < 22", () => {
  it("the refusal names both versions and what to run", () => {
    expect(unsupportedNode("20.20.2")).toMatch(
      /^gpuhost needs Node.js 22 or newer .* this is Node.js 20\.20\.2 .*npm run gpuhost/,
    );
    expect(unsupportedNode("22.0.0")).toBeUndefined();
    expect(unsupportedNode("24.22.3")).toBeUndefined();
  });

  it.skipIf(old === undefined)(
    `the real command under ${old ?? "(skipped: no Node.js older than 22 in /usr/bin, /usr/local/bin)"}: one sentence, exit 1`,
    () => {
      for (const args of [["plan", "--throughput", "1"], ["--help"]]) {
        const r = spawnSync(old!, ["--import", "tsx", path.join(repo, "cli/gpuhost.ts"), ...args], {
          cwd: repo,
          encoding: "utf8",
          timeout: 120_000,
        });
        expect(r.status, r.stderr).toBe(1);
        expect(r.stdout).toBe("");
        expect(r.stderr).toMatch(
          /^gpuhost needs Node.js 22 or newer \(package.json "engines"\), and this is Node.js \d+\.[^\n]*\n$/,
        );
      }
    },
    150_000,
  );
});
