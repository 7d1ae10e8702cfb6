/**
 * The real Pulumi engine, end to end, on a throwaway project and local backend: the CLI built by
 * engine/setup.sh, the language host, a dynamic provider (create and read really run) and the command
 * provider (a local.Command really runs a shell). No mocks anywhere.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { EngineOptions, PROJECT_ROOT, ensureStack, runPulumi } from "../../engine/pulumi";

const work = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-engine-"));
const evidence = path.join(work, "evidence");
const opts: EngineOptions = { cwd: work, stateDir: path.join(work, "state"), timeoutMs: 240_000 };
const stack = "engine-test";

async function pulumi(...args: string[]) {
  const r = await runPulumi([...args, "--stack", stack], opts);
  if (r.code !== 0) throw new Error(`pulumi ${args.join(" ")} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r;
}

beforeAll(async () => {
  fs.mkdirSync(evidence);
  // The program is the compiled fixture (npm test compiles before vitest runs).
  const program = path.join(PROJECT_ROOT, "dist", "test", "engine", "fixture", "program.js");
  expect(fs.existsSync(program), `${program} (run tsc first)`).toBe(true);
  fs.writeFileSync(
    path.join(work, "Pulumi.yaml"),
    `name: gpuhost-engine-test\nruntime:\n  name: nodejs\n  options:\n    typescript: false\nmain: ${program}\n`,
  );
  await ensureStack(stack, opts);
  await pulumi("config", "set", "evidenceDir", evidence);
}, 120_000);

afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

describe("the real Pulumi engine", () => {
  it("reports the pinned CLI version", async () => {
    const r = await runPulumi(["version"], opts);
    expect(r.stdout.trim()).toBe("v3.276.0");
  });

  it("runs pulumi up: the command provider runs a shell, the dynamic provider's create runs", async () => {
    await pulumi("up", "--yes", "--skip-preview");
    const out = JSON.parse((await pulumi("stack", "output", "--json")).stdout);
    expect(out.greeting).toBe(`hello from ${os.type()}`);
    expect(out.markerLabel).toBe("marker-1");
    expect(fs.readFileSync(path.join(evidence, "command.out"), "utf8")).toBe(`hello from ${os.type()}`);
    expect(fs.readFileSync(path.join(evidence, "creates.log"), "utf8")).toBe("marker-1\n");
  }, 240_000);

  it("a second preview expects no changes", async () => {
    const r = await pulumi("preview", "--expect-no-changes");
    expect(r.code).toBe(0);
    expect(fs.readFileSync(path.join(evidence, "creates.log"), "utf8")).toBe("marker-1\n");
  }, 240_000);

  it("pulumi refresh runs the dynamic provider's read", async () => {
    await pulumi("refresh", "--yes", "--skip-preview");
    expect(fs.readFileSync(path.join(evidence, "reads.log"), "utf8")).toContain("marker-1");
  }, 240_000);

  it("pulumi destroy runs the delete commands", async () => {
    await pulumi("destroy", "--yes", "--skip-preview");
    expect(fs.existsSync(path.join(evidence, "command.out"))).toBe(false);
    expect(fs.readFileSync(path.join(evidence, "deletes.log"), "utf8")).toBe("marker-1\n");
  }, 240_000);
});
