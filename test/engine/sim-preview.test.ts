// #12.6 / #10.2: `pulumi preview` on the sim stack writes nothing anywhere. The simulated host's
// folder is laid out by a resource step at `up`; evaluating the program (which preview does) must
// leave the project folder, the stack's own folder and the host paths an escaped root would reach
// exactly as they were.
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../engine/pulumi";
import { createTestStack, simHostNamed, type TestStack } from "../support/stack";

/** Every path under `dir` with its type, size, mode and mtime; `skip` names top-level entries left out. */
function snapshot(dir: string, skip: string[] = []): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string) => {
    for (const entry of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, entry.name);
      const rel = path.relative(dir, p);
      if (skip.includes(rel)) continue;
      const st = fs.lstatSync(p);
      out.set(
        rel,
        `${entry.isDirectory() ? "d" : entry.isSymbolicLink() ? "l" : "f"}:${st.size}:${st.mode}:${st.mtimeMs}`,
      );
      if (entry.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out;
}

function changes(before: Map<string, string>, after: Map<string, string>): string[] {
  const keys = new Set([...before.keys(), ...after.keys()]);
  return [...keys].filter((k) => before.get(k) !== after.get(k)).sort();
}

/** What a host path looks like now: absent, or its type, size and mtime. */
function hostPathState(p: string): string {
  const st = fs.lstatSync(p, { throwIfNoEntry: false });
  return st ? `${st.isDirectory() ? "d" : "f"}:${st.size}:${st.mtimeMs}` : "absent";
}

let s: TestStack | undefined;
afterAll(async () => {
  await s?.dispose();
}, 300_000);

describe("pulumi preview on the sim stack", () => {
  it("writes nothing: the project folder, the stack folder and the host's paths are unchanged", async () => {
    const host = `preview-${crypto.randomBytes(3).toString("hex")}`;
    const hostRoot = path.join(PROJECT_ROOT, ".gpuhost", "sim-hosts", host);
    s = await createTestStack("sim", [
      ...simHostNamed(host),
      { path: "gpuhost:apiKey", value: `sk-${crypto.randomBytes(12).toString("hex")}`, secret: true },
    ]);
    // .gpuhost/ holds what other suites running beside this one write (their stacks, vitest's
    // report), node_modules/.vite and node_modules/.vitest-cache vitest's own caches (the second is
    // vitest 5's module cache, written when a worker beside this one imports a file for the first
    // time: a fresh-clone CI saw it appear during the preview): this host's folder is checked by name.
    const skip = [".gpuhost", ".git", "node_modules/.vite", "node_modules/.vitest-cache"];
    const hostPaths = [
      "/var/lib/gpuhost-sim",
      "/etc/passwd",
      "/etc/group",
      "/etc/apt/sources.list.d",
      "/etc/systemd/system",
    ];
    const project = snapshot(PROJECT_ROOT, skip);
    const stackDir = snapshot(s.dir);
    const hostBefore = hostPaths.map(hostPathState);

    const r = await s.ok("preview", "--diff");
    // The preview did evaluate the program and plan the host (so the check below is not vacuous).
    expect(r.stdout).toContain(`${host}-prepare`);
    expect(r.stdout).toContain(`${host}-toolkit-repository`);

    expect(changes(project, snapshot(PROJECT_ROOT, skip))).toEqual([]);
    expect(fs.existsSync(hostRoot), `${hostRoot} was created by the preview`).toBe(false);
    expect(changes(stackDir, snapshot(s.dir))).toEqual([]);
    expect(hostPaths.map(hostPathState)).toEqual(hostBefore);
  }, 300_000);
});
