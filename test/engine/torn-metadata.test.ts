/**
 * A `pulumi up` killed on a file backend can leave the stack's metadata file (`<stack>.json.attrs`,
 * written in place by the backend's blob library) empty, and the engine then fails every command on
 * the stack with "failed to load checkpoint: EOF" (seen in CI after test/engine/pending-operations
 * killed an up). The real engine is shown failing on such a file; gpuhost's runPulumi removes it first
 * and the stack loads whole. A running up writes that same file in place: the repair runs only under
 * the stack's lock, so it never removes a file a live up is writing (a real up holding its lock, and
 * a process writing as the backend does, repaired thousands of times meanwhile).
 */
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { engineEnv, ensureStack, PROJECT_ROOT, pulumiBin, repairTornMetadata, runPulumi } from "../../engine/pulumi";
import { testEngineOptions, writeFixtureProject } from "../support/engine";

const work = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-torn-"));
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

/** Every .attrs file under DIR. */
function attrsFiles(dir: string): string[] {
  return (fs.readdirSync(dir, { recursive: true }) as string[])
    .filter((f) => f.endsWith(".attrs"))
    .map((f) => path.join(dir, f));
}

describe("a stack whose metadata file a killed pulumi left empty", () => {
  it("the engine alone cannot load it; runPulumi removes the torn file, names it, and the stack loads whole", async () => {
    const opts = testEngineOptions(work, 120_000);
    fs.writeFileSync(path.join(work, "index.js"), "");
    writeFixtureProject(work, "torn", path.join(work, "index.js"));
    await ensureStack("dev", opts);
    expect((await runPulumi(["config", "set", "greeting", "kept", "--stack", "dev"], opts)).code).toBe(0);
    // A stack's checkpoint appears with its first update; an export/import writes one without running anything.
    const exported = await runPulumi(["stack", "export", "--stack", "dev"], opts);
    expect(exported.code, exported.stderr).toBe(0);
    fs.writeFileSync(path.join(work, "dep.json"), exported.stdout);
    expect(
      (await runPulumi(["stack", "import", "--file", path.join(work, "dep.json"), "--stack", "dev"], opts)).code,
    ).toBe(0);

    const stacks = path.join(opts.stateDir!, ".pulumi", "stacks");
    const torn = attrsFiles(stacks).find((f) => f.endsWith("dev.json.attrs"));
    expect(torn, attrsFiles(stacks).join(", ")).toBeDefined();
    fs.writeFileSync(torn!, "");

    const plain = spawnSync(pulumiBin(), ["stack", "export", "--stack", "dev", "--non-interactive"], {
      cwd: work,
      env: engineEnv(opts),
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(plain.status).not.toBe(0);
    expect(plain.stderr).toMatch(/failed to load checkpoint: EOF/);

    const stderr: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = (chunk: string) => (stderr.push(String(chunk)), true);
    let r;
    try {
      r = await runPulumi(["stack", "export", "--stack", "dev"], opts);
    } finally {
      process.stderr.write = write;
    }
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual(JSON.parse(exported.stdout));
    expect(stderr.join("")).toContain(
      `removed 1 empty or torn metadata file(s) a killed pulumi left in the file backend`,
    );
    expect(stderr.join("")).toContain(torn);
    expect(fs.existsSync(torn!)).toBe(false);
  }, 120_000);

  it("a running up holds the stack's lock where the repair looks for it: the metadata file, torn while it runs, is left alone", async () => {
    const dir = fs.mkdtempSync(path.join(work, "up-"));
    const opts = testEngineOptions(dir, 180_000);
    writeFixtureProject(
      dir,
      "torn-up",
      path.join(PROJECT_ROOT, "dist", "test", "engine", "fixture", "hold-program.js"),
    );
    await ensureStack("dev", opts);
    const first = await runPulumi(["up", "--yes", "--skip-preview", "--stack", "dev"], opts);
    expect(first.code, first.stdout + first.stderr).toBe(0);
    const marker = path.join(dir, "running");
    expect((await runPulumi(["config", "set", "marker", marker, "--stack", "dev"], opts)).code).toBe(0);
    const up = runPulumi(["up", "--yes", "--skip-preview", "--stack", "dev"], opts);
    for (let i = 0; i < 1200 && !fs.existsSync(marker); i++) await new Promise((r) => setTimeout(r, 50));
    expect(fs.existsSync(marker), "the up's program never ran").toBe(true);
    const meta = path.join(opts.stateDir!, ".pulumi");
    // the lock the engine took, in the folder the repair reads
    expect(
      fs.readdirSync(path.join(meta, "locks", "organization", "torn-up", "dev")).filter((n) => n.endsWith(".json")),
    ).toHaveLength(1);
    const attrs = path.join(meta, "stacks", "torn-up", "dev.json.attrs");
    const whole = fs.readFileSync(attrs, "utf8");
    // empty, as the up leaves it for a moment each time it saves
    fs.writeFileSync(attrs, "");
    const removed = repairTornMetadata(`file://${opts.stateDir}`);
    const left = fs.existsSync(attrs);
    fs.writeFileSync(attrs, whole);
    expect(removed).toEqual([]);
    expect(left).toBe(true);
    const r = await up;
    expect(r.code, r.stdout + r.stderr).toBe(0);
  }, 180_000);

  it("repairTornMetadata: only file backends, only .attrs that hold no JSON beside a whole object, only stacks and locks", () => {
    const root = fs.mkdtempSync(path.join(work, "b-"));
    const at = (p: string, text: string) => {
      fs.mkdirSync(path.dirname(path.join(root, p)), { recursive: true });
      fs.writeFileSync(path.join(root, p), text);
    };
    for (const name of ["dev", "ok", "half", "new"]) at(`.pulumi/stacks/p/${name}.json`, "{}");
    at(".pulumi/stacks/p/dev.json.attrs", "");
    at(".pulumi/stacks/p/ok.json.attrs", '{"user.content_type":"application/json"}\n');
    at(".pulumi/stacks/p/half.json.attrs", '{"user.cont');
    // a stack's first checkpoint being written: its .attrs comes before the object
    at(".pulumi/stacks/p/first.json.attrs", "");
    // the older layout (no projects)
    at(".pulumi/stacks/old.json", "{}");
    at(".pulumi/stacks/old.json.attrs", "");
    // the lock of an up that was killed (this host, a PID above the kernel's pid_max), its metadata torn
    at(".pulumi/locks/organization/p/dev/x.json", JSON.stringify({ pid: 4194999, hostname: os.hostname() }));
    at(".pulumi/locks/organization/p/dev/x.json.attrs", "");
    at(".pulumi/history/p/dev/y.json", "{}");
    at(".pulumi/history/p/dev/y.json.attrs", "");
    expect(repairTornMetadata(`s3://bucket`)).toEqual([]);
    expect(repairTornMetadata(`file://${root}`).sort()).toEqual(
      [
        ".pulumi/locks/organization/p/dev/x.json.attrs",
        ".pulumi/stacks/old.json.attrs",
        ".pulumi/stacks/p/dev.json.attrs",
        ".pulumi/stacks/p/half.json.attrs",
      ].map((p) => path.join(root, p)),
    );
    for (const kept of [
      "stacks/p/ok.json.attrs",
      "stacks/p/dev.json",
      "stacks/p/first.json.attrs",
      "history/p/dev/y.json.attrs",
      // the killed run's lock is `pulumi cancel`'s business
      "locks/organization/p/dev/x.json",
    ]) {
      expect(fs.existsSync(path.join(root, ".pulumi", kept)), kept).toBe(true);
    }
    // the repair's own lock is gone, and nothing else was left beside .pulumi's folders
    expect(fs.readdirSync(path.join(root, ".pulumi/locks/organization/p/dev"))).toEqual(["x.json"]);
    expect(fs.readdirSync(path.join(root, ".pulumi")).sort()).toEqual(["history", "locks", "stacks"]);
  });

  it("repairTornMetadata leaves a stack whose lock a live process holds, or one of another host", () => {
    const root = fs.mkdtempSync(path.join(work, "l-"));
    const at = (p: string, text: string) => {
      fs.mkdirSync(path.dirname(path.join(root, p)), { recursive: true });
      fs.writeFileSync(path.join(root, p), text);
    };
    for (const stack of ["live", "remote"]) {
      at(`.pulumi/stacks/p/${stack}.json`, "{}");
      at(`.pulumi/stacks/p/${stack}.json.attrs`, "");
    }
    at(".pulumi/locks/organization/p/live/a.json", JSON.stringify({ pid: process.pid, hostname: os.hostname() }));
    at(".pulumi/locks/organization/p/live/a.json.attrs", "");
    at(".pulumi/locks/organization/p/remote/b.json", JSON.stringify({ pid: 4194999, hostname: "another-host" }));
    expect(repairTornMetadata(`file://${root}`)).toEqual([]);
    expect(fs.readFileSync(path.join(root, ".pulumi/stacks/p/live.json.attrs"), "utf8")).toBe("");
    expect(fs.readFileSync(path.join(root, ".pulumi/stacks/p/remote.json.attrs"), "utf8")).toBe("");
    expect(fs.readdirSync(path.join(root, ".pulumi/locks/organization/p/live")).sort()).toEqual([
      "a.json",
      "a.json.attrs",
    ]);
  });

  it("a process that holds the stack's lock and rewrites its metadata in place, as a running up does (a stand-in for the up): the repair, run over and over meanwhile, never removes it; once that process is killed, it does", async () => {
    const root = fs.mkdtempSync(path.join(work, "w-"));
    const stacks = path.join(root, ".pulumi", "stacks", "p");
    const attrs = path.join(stacks, "dev.json.attrs");
    // As fileblob's setAttrs: os.Create (empty), the JSON written, closed; the up holds its lock
    // (pulumi's lock file: pid, username, hostname, timestamp) all along. The file stays empty a
    // millisecond each time, where a real up is empty for a moment only: the race made frequent.
    const writer = `const fs = require("node:fs"), os = require("node:os"), path = require("node:path");
      const locks = ${JSON.stringify(path.join(root, ".pulumi", "locks", "organization", "p", "dev"))};
      fs.mkdirSync(locks, { recursive: true });
      fs.writeFileSync(path.join(locks, "up.json"), JSON.stringify({ pid: process.pid, username: os.userInfo().username, hostname: os.hostname(), timestamp: new Date() }));
      fs.mkdirSync(${JSON.stringify(stacks)}, { recursive: true });
      fs.writeFileSync(${JSON.stringify(path.join(stacks, "dev.json"))}, "{}");
      const pause = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
      let writes = 0;
      const deadline = Date.now() + 20000;
      while (Date.now() < deadline) {
        const fd = fs.openSync(${JSON.stringify(attrs)}, "w");
        if (writes++ === 0) console.log("writing");
        pause(1);
        fs.writeSync(fd, JSON.stringify({ "user.content_type": "application/json", md5: "x" }) + "\\n");
        fs.closeSync(fd);
        pause(1);
      }`;
    const child = spawn(process.execPath, ["-e", writer], { stdio: ["ignore", "pipe", "inherit"], timeout: 30_000 });
    const exited = new Promise((r) => child.once("exit", r));
    let removals = 0;
    let passes = 0;
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout.once("data", () => resolve());
        child.once("exit", () => reject(new Error("the writer ended before it wrote")));
      });
      const until = Date.now() + 3000;
      while (Date.now() < until) {
        if (repairTornMetadata(`file://${root}`).includes(attrs)) removals++;
        passes++;
        await new Promise((r) => setImmediate(r));
      }
    } finally {
      child.kill("SIGKILL");
      await exited;
    }
    expect(passes).toBeGreaterThan(100);
    expect(removals, `${removals} removals in ${passes} passes`).toBe(0);
    // Killed while it wrote: its lock names a process that is gone, and the file may be left empty.
    fs.writeFileSync(attrs, "");
    expect(repairTornMetadata(`file://${root}`)).toEqual([attrs]);
  }, 40_000);
});
