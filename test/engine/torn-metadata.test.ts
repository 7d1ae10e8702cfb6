/**
 * A `pulumi up` killed on a file backend can leave the stack's metadata file (`<stack>.json.attrs`,
 * written in place by the backend's blob library) empty, and the engine then fails every command on
 * the stack with "failed to load checkpoint: EOF" (seen in CI after test/engine/pending-operations
 * killed an up). The real engine is shown failing on such a file; gpuhost's runPulumi removes it first
 * and the stack loads whole.
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { engineEnv, ensureStack, pulumiBin, repairTornMetadata, runPulumi } from "../../engine/pulumi";
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

  it("repairTornMetadata: only file backends, only .attrs that hold no JSON, only stacks and locks", () => {
    const root = fs.mkdtempSync(path.join(work, "b-"));
    const at = (p: string, text: string) => {
      fs.mkdirSync(path.dirname(path.join(root, p)), { recursive: true });
      fs.writeFileSync(path.join(root, p), text);
    };
    at(".pulumi/stacks/p/dev.json.attrs", "");
    at(".pulumi/stacks/p/ok.json.attrs", '{"user.content_type":"application/json"}\n');
    at(".pulumi/stacks/p/half.json.attrs", '{"user.cont');
    at(".pulumi/stacks/p/dev.json", "");
    at(".pulumi/locks/organization/p/dev/x.json.attrs", "");
    at(".pulumi/history/p/dev/y.json.attrs", "");
    expect(repairTornMetadata(`s3://bucket`)).toEqual([]);
    expect(repairTornMetadata(`file://${root}`).sort()).toEqual(
      [
        ".pulumi/locks/organization/p/dev/x.json.attrs",
        ".pulumi/stacks/p/dev.json.attrs",
        ".pulumi/stacks/p/half.json.attrs",
      ].map((p) => path.join(root, p)),
    );
    expect(fs.existsSync(path.join(root, ".pulumi/stacks/p/ok.json.attrs"))).toBe(true);
    expect(fs.existsSync(path.join(root, ".pulumi/stacks/p/dev.json"))).toBe(true);
    expect(fs.existsSync(path.join(root, ".pulumi/history/p/dev/y.json.attrs"))).toBe(true);
  });
});
