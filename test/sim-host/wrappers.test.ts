// The sim-host/bin wrappers run the shims compiled into dist/ (npm run build), found from the
// wrapper's real path; without a build they say so instead of failing obscurely.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

const repo = path.resolve(__dirname, "../..");
const binDir = path.join(repo, "sim-host/bin");
const wrappers = fs.readdirSync(binDir);
let tmp: string;

// Real path: the wrappers resolve theirs with readlink, so the message names it.
beforeEach(() => {
  tmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-simbin-")));
});
afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe("sim-host/bin wrappers", () => {
  it("are the six tools, each pointing at a compiled shim that the build produced", () => {
    expect(wrappers.sort()).toEqual([
      "apt-get",
      "dpkg",
      "dpkg-query",
      "journalctl",
      "systemctl",
      "update-alternatives",
    ]);
    for (const w of wrappers) {
      const target = /dist\/sim-host\/([a-z]+\.js)/.exec(fs.readFileSync(path.join(binDir, w), "utf8"))?.[1];
      expect(target, w).toBeDefined();
      expect(fs.existsSync(path.join(repo, "dist/sim-host", target!)), `${target} (run npx tsc -p . first)`).toBe(true);
    }
  });

  it("run the compiled shim when called through a symlink from elsewhere", () => {
    const root = path.join(tmp, "root");
    fs.mkdirSync(path.join(root, "etc/systemd/system"), { recursive: true });
    fs.symlinkSync(path.join(binDir, "systemctl"), path.join(tmp, "systemctl"));
    const r = spawnSync(path.join(tmp, "systemctl"), ["is-active", "nothing"], {
      env: { ...process.env, GPUHOST_ROOT: root },
      encoding: "utf8",
    });
    expect(r.stdout).toBe("inactive\n");
    expect(r.status).toBe(3);
  });

  it.each(wrappers)("%s fails naming `npm run build` when the compiled shim is missing", (w) => {
    // A copy of the source layout with no dist/ next to it: what a checkout looks like before a build.
    const copyBin = path.join(tmp, "sim-host/bin");
    fs.mkdirSync(copyBin, { recursive: true });
    fs.copyFileSync(path.join(binDir, w), path.join(copyBin, w));
    fs.chmodSync(path.join(copyBin, w), 0o755);
    const r = spawnSync(path.join(copyBin, w), ["--version"], {
      env: { ...process.env, GPUHOST_ROOT: path.join(tmp, "root") },
      encoding: "utf8",
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(`${path.join(tmp, "dist/sim-host")}/`);
    expect(r.stderr).toContain("is missing; compile the project first (npm run build)");
  });
});
