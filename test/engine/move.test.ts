/**
 * A program and its state moved to another folder keep working: up in folder A, move A (program,
 * node_modules, file backend) to B, A gone, then up, refresh and preview in B change nothing and fail
 * nothing. What this proves is the engine side: the command provider registered in the plugin cache
 * and the dynamic-provider host find their code from the program's folder when they start, never from
 * a folder named at setup (before, the registered provider started <old folder>/dist/... and failed).
 * The program is the engine fixture (a local.Command and a dynamic resource), depending on gpuhost
 * through node_modules as another team's program would; its copy of gpuhost moves with it, so a
 * provider that remembered where gpuhost was would start code that no longer exists.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT, ensureStack, runPulumi } from "../../engine/pulumi";
import { testEngineOptions } from "../support/engine";

const work = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-move-"));
const a = path.join(work, "a");
const b = path.join(work, "b");
const evidence = path.join(work, "evidence");
const stack = "moved";

async function pulumi(dir: string, ...args: string[]) {
  const r = await runPulumi([...args, "--stack", stack], testEngineOptions(dir, 240_000));
  if (r.code !== 0) throw new Error(`pulumi ${args.join(" ")} in ${dir} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r;
}

beforeAll(async () => {
  fs.mkdirSync(path.join(a, "node_modules"), { recursive: true });
  fs.mkdirSync(evidence);
  // gpuhost itself inside A, moved with it (package.json, its compiled engine and the host-key probe
  // the engine's command provider imports: what the command provider runs), the other packages linked
  // from this checkout
  const gpuhost = path.join(a, "node_modules", "gpuhost");
  fs.mkdirSync(gpuhost);
  fs.copyFileSync(path.join(PROJECT_ROOT, "package.json"), path.join(gpuhost, "package.json"));
  for (const dir of ["engine", "components/host-key"])
    fs.cpSync(path.join(PROJECT_ROOT, "dist", dir), path.join(gpuhost, "dist", dir), { recursive: true });
  for (const entry of fs.readdirSync(path.join(PROJECT_ROOT, "node_modules"))) {
    if (entry.startsWith(".")) continue;
    fs.symlinkSync(path.join(PROJECT_ROOT, "node_modules", entry), path.join(a, "node_modules", entry));
  }
  fs.copyFileSync(path.join(PROJECT_ROOT, "dist", "test", "engine", "fixture", "program.js"), path.join(a, "index.js"));
  fs.writeFileSync(path.join(a, "package.json"), JSON.stringify({ name: "moved-program", main: "index.js" }));
  fs.writeFileSync(
    path.join(a, "Pulumi.yaml"),
    "name: gpuhost-move-test\nruntime:\n  name: nodejs\n  options:\n    typescript: false\nmain: .\n",
  );
  await ensureStack(stack, testEngineOptions(a, 120_000));
  await pulumi(a, "config", "set", "evidenceDir", evidence);
  await pulumi(a, "up", "--yes", "--skip-preview");
}, 300_000);

afterAll(async () => {
  if (fs.existsSync(b))
    await runPulumi(["destroy", "--yes", "--skip-preview", "--stack", stack], testEngineOptions(b, 240_000));
  fs.rmSync(work, { recursive: true, force: true });
}, 300_000);

describe("a program and its state moved to another folder", () => {
  it("up, refresh and preview in the new folder: no error, no change", async () => {
    fs.renameSync(a, b);
    expect(fs.existsSync(a)).toBe(false);
    const up = await pulumi(b, "up", "--yes", "--skip-preview");
    expect(up.stdout).toMatch(/\d+ unchanged/);
    expect(up.stdout).not.toMatch(/created|updated|replaced|deleted/);
    const refresh = await pulumi(b, "refresh", "--preview-only", "--expect-no-changes");
    expect(refresh.code).toBe(0);
    const preview = await pulumi(b, "preview", "--expect-no-changes", "--diff");
    expect(preview.stdout).not.toMatch(/replace|~ |\+ |- /);
    // the create ran once, in A; the command provider and the dynamic provider both ran again in B
    expect(fs.readFileSync(path.join(evidence, "creates.log"), "utf8")).toBe("marker-1\n");
    expect(fs.readFileSync(path.join(evidence, "reads.log"), "utf8")).toContain("marker-1");
  }, 600_000);
});
