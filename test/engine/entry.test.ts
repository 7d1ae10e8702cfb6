/**
 * The README's two commands on a machine as it comes: `npm test` and `npm run demo` go through
 * engine/run.sh, which puts a supported Node.js first on PATH (the machine's when it is >= 22, else a
 * pinned Node 24 unpacked from the npm registry into the cache) before anything else runs, and
 * `npm test` sets up its Debian prerequisites or stops at once saying what to run.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../engine/pulumi";
import { run } from "../support/run";

const runSh = path.join(PROJECT_ROOT, "engine", "run.sh");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-entry-"));
fs.chmodSync(tmp, 0o755);
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe("a supported Node.js everywhere", () => {
  it("the tests themselves run on Node >= 22", () => {
    expect(Number(process.versions.node.split(".")[0])).toBeGreaterThanOrEqual(22);
  });

  it("run.sh puts the pinned Node 24 first on PATH where the machine's node is older", async () => {
    // a `node` that claims to be 20, first on PATH, as on a machine that ships Node 20
    const fake = path.join(tmp, "old-node");
    fs.mkdirSync(fake);
    fs.writeFileSync(path.join(fake, "node"), `#!/bin/sh\necho 20\n`, { mode: 0o755 });
    const r = await run("bash", [runSh, "node", "-p", "process.version + ' ' + process.execPath"], {
      env: { ...process.env, PATH: `${fake}${path.delimiter}${process.env.PATH}` },
      timeout: 300_000,
    });
    expect(r.status, r.stderr).toBe(0);
    const [version, execPath] = r.stdout.trim().split(" ");
    expect(version).toMatch(/^v24\./);
    expect(execPath).toMatch(/\/node\/v24\.[\d.]+\/bin\/node$/);
    expect(execPath.startsWith(PROJECT_ROOT)).toBe(false); // the cache, not the checkout
  }, 300_000);

  it("run.sh keeps the machine's node when it is supported", async () => {
    const r = await run("bash", [runSh, "node", "-p", "process.execPath"], { timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    const first = (await run("sh", ["-c", "command -v node"])).stdout.trim();
    const major = Number((await run(first, ["-p", "process.versions.node.split('.')[0]"])).stdout);
    if (major >= 22) expect(r.stdout.trim()).toBe(fs.realpathSync(first));
    else expect(r.stdout.trim()).toMatch(/\/node\/v24\.[\d.]+\/bin\/node$/);
  }, 60_000);
});

describe("npm test's prerequisites", () => {
  it("as root: the CI scripts run and find everything in place (nothing installed, downloaded or built again)", async () => {
    if (process.getuid?.() !== 0) return;
    const r = await run("bash", [path.join(PROJECT_ROOT, "engine", "test-prereqs.sh")], { timeout: 600_000 });
    expect(r.status, r.stderr).toBe(0);
    // Each script says on stderr when it installs, downloads or builds (`smg: installing ...`): a
    // set-up machine hears none of it. (Its speed is not asserted here: docs/development.md measures it.)
    expect(r.stderr.split("\n").filter((l) => /install|download|build|unpack/i.test(l))).toEqual([]);
  }, 600_000);

  it("not root: stops at once with one sentence saying what to run", async () => {
    if (process.getuid?.() !== 0) return; // needs root to become another user
    // `nobody` cannot reach a checkout under a 0700 folder (root's home is one): it runs a copy of
    // the scripts in a folder anyone can read, laid out as in the checkout.
    const copy = readableCopy(["engine/test-prereqs.sh", ".ci/prereqs.sh", ".ci/testhost-prereqs.sh"]);
    const r = await run("runuser", ["-u", "nobody", "--", "bash", path.join(copy, "engine", "test-prereqs.sh")], {
      timeout: 30_000,
      cwd: copy,
      env: { PATH: process.env.PATH },
    });
    expect(r.status).toBe(1);
    const lines = r.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/needs root: run `sudo npm test`.*GPUHOST_SKIP_TESTHOST=1 npm test/);
  });
});

/** The checkout's files `rels` copied into a fresh folder under tmp that every user can read and enter. */
function readableCopy(rels: string[]): string {
  const dir = fs.mkdtempSync(path.join(tmp, "checkout-"));
  for (const rel of rels) {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.copyFileSync(path.join(PROJECT_ROOT, rel), path.join(dir, rel));
  }
  // mkdtemp makes a 0700 folder and the copies follow the umask: open them up for `nobody`.
  fs.chmodSync(dir, 0o755);
  for (const entry of fs.readdirSync(dir, { recursive: true, encoding: "utf8" })) {
    const full = path.join(dir, entry);
    fs.chmodSync(full, fs.statSync(full).isDirectory() ? 0o755 : 0o644);
  }
  return dir;
}
