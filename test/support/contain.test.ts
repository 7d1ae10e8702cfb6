// engine/contain.sh, which `npm test` runs vitest under: whatever the contained command started is
// gone within 10 s of its end, whether it exited, was interrupted with Ctrl-C (SIGINT to its process
// group, as a terminal sends it) or was killed with SIGKILL; so are its temporary folder and the port
// reservations of its dead processes. The contained command here is a small node program that leaves
// behind what the suite's fixtures leave: a detached child in a session of its own (the simulated
// host's unit supervisors), one with a scrubbed environment (SMG, sshd), and a temporary folder.
import { type ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { alive, killAll } from "./processes";
import { shellcheckFindings } from "./run";

const ROOT = path.resolve(__dirname, "../..");
const CONTAIN = path.join(ROOT, "engine/contain.sh");
const IS_ROOT = process.getuid?.() === 0;

// The contained program: starts its leftovers, writes what it made into OUT as JSON, then waits
// (or exits with code 3 when told to).
const PROGRAM = `
const { spawn } = require("node:child_process");
const fs = require("node:fs"), os = require("node:os"), path = require("node:path");
const [out, mode] = process.argv.slice(1);
const inherit = spawn("sleep", ["300"], { detached: true, stdio: "ignore" });
const scrubbed = spawn("sleep", ["301"], { detached: true, stdio: "ignore", env: { PATH: process.env.PATH } });
inherit.unref(); scrubbed.unref();
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "contained-"));
fs.writeFileSync(path.join(tmp, "file"), "x");
fs.writeFileSync(out + ".new", JSON.stringify({ inherit: inherit.pid, scrubbed: scrubbed.pid, tmp, tmpdir: os.tmpdir(), ports: process.env.GPUHOST_PORT_RESERVATIONS }));
fs.renameSync(out + ".new", out);
if (mode === "exit") process.exit(3);
setInterval(() => {}, 1000);
`;

interface Made {
  inherit: number;
  scrubbed: number;
  tmp: string;
  tmpdir: string;
  ports: string;
}

const started: number[] = [];
afterEach(() => killAll(started.splice(0)));

async function until(what: () => boolean, seconds: number): Promise<boolean> {
  for (let i = 0; i < seconds * 10; i++) {
    if (what()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return what();
}

/** Starts PROGRAM under contain.sh in a process group of its own; resolves with what it made. */
async function contained(
  mode: "wait" | "exit",
  env: NodeJS.ProcessEnv = {},
): Promise<{ child: ChildProcess; made: Made }> {
  const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "contain-test-")), "made.json");
  const child = spawn("bash", [CONTAIN, process.execPath, "-e", PROGRAM, out, mode], {
    detached: true,
    stdio: "ignore",
    env: { ...process.env, ...env },
  });
  if (child.pid !== undefined) started.push(child.pid);
  expect(await until(() => fs.existsSync(out), 30), "the contained program started").toBe(true);
  const made = JSON.parse(fs.readFileSync(out, "utf8")) as Made;
  started.push(made.inherit, made.scrubbed);
  return { child, made };
}

/** What is still there 10 s after the contained command ended. */
async function leftAfter(made: Made, scrubbedToo: boolean): Promise<string[]> {
  await until(() => !alive(made.inherit) && !(scrubbedToo && alive(made.scrubbed)) && !fs.existsSync(made.tmpdir), 10);
  return [
    ...(alive(made.inherit) ? [`detached child ${made.inherit}`] : []),
    ...(scrubbedToo && alive(made.scrubbed) ? [`detached child with a scrubbed environment ${made.scrubbed}`] : []),
    ...(fs.existsSync(made.tmpdir) ? [`the run's temporary folder ${made.tmpdir}`] : []),
  ];
}

describe("engine/contain.sh", () => {
  it("is shellcheck-clean", async () => {
    expect(await shellcheckFindings(["engine/contain.sh"], { cwd: ROOT, bash: true })).toBe("");
  });

  it("gives the run a temporary folder of its own and keeps the shared port reservations where every run finds them", async () => {
    const { made } = await contained("wait");
    expect(path.dirname(made.tmp)).toBe(made.tmpdir);
    expect(path.basename(made.tmpdir)).toMatch(/^gpuhost-run\./);
    // Enterable by others by name, not listable, as /tmp's own folders are reachable (runuser -u nobody).
    expect(fs.statSync(made.tmpdir).mode & 0o777).toBe(0o711);
    expect(made.ports).toBe(
      process.env.GPUHOST_PORT_RESERVATIONS || path.join(os.tmpdir(), `gpuhost-ports-${process.getuid?.()}`),
    );
  });

  it("leaves nothing 10 s after SIGKILL of the contained command", async () => {
    const { child, made } = await contained("wait");
    process.kill(child.pid!, "SIGKILL");
    expect(await leftAfter(made, IS_ROOT)).toEqual([]);
  });

  it("leaves nothing 10 s after one Ctrl-C (SIGINT to its process group)", async () => {
    const { child, made } = await contained("wait");
    process.kill(-child.pid!, "SIGINT");
    expect(await leftAfter(made, IS_ROOT)).toEqual([]);
  });

  it("keeps the command's exit code and cleans up after a normal exit", async () => {
    const { child, made } = await contained("exit");
    const code = await new Promise<number | null>((r) =>
      child.exitCode !== null ? r(child.exitCode) : child.once("exit", r),
    );
    expect(code).toBe(3);
    expect(await leftAfter(made, IS_ROOT)).toEqual([]);
  });

  it("without a cgroup still stops what carries the run's marker", async () => {
    const { child, made } = await contained("wait", { GPUHOST_CONTAIN_NO_CGROUP: "1" });
    process.kill(child.pid!, "SIGKILL");
    // Only the cgroup reaches a child that dropped the environment: not asserted here.
    expect(await leftAfter(made, false)).toEqual([]);
  });

  it("removes the reservations of dead processes from the shared port folder, not a live one's", async () => {
    const ports = fs.mkdtempSync(path.join(os.tmpdir(), "contain-ports-"));
    fs.writeFileSync(path.join(ports, "40001"), "999999999");
    fs.writeFileSync(path.join(ports, "40002"), String(process.pid));
    const { child, made } = await contained("wait", { GPUHOST_PORT_RESERVATIONS: ports });
    process.kill(child.pid!, "SIGKILL");
    expect(await leftAfter(made, IS_ROOT)).toEqual([]);
    expect(await until(() => !fs.existsSync(path.join(ports, "40001")), 10)).toBe(true);
    expect(fs.existsSync(path.join(ports, "40002"))).toBe(true);
  });
});
