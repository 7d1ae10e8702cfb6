/**
 * The real Pulumi engine, end to end, on a throwaway project and local backend: the CLI engine/setup.sh
 * chose, the language host, a dynamic provider (create and read really run) and the command provider
 * (a local.Command really runs a shell). No mocks anywhere. Run once with the plugins the setup put in
 * place and, where GPUHOST_UPSTREAM_PLUGINS names upstream builds, once more with those.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { PROJECT_ROOT, runPulumi } from "../../engine/pulumi";
import { fixtureWorkspace, pluginSets } from "../support/engine";

/** The oldest CLI engine/setup.sh accepts (its PULUMI_MIN_VERSION). */
const minVersion = /^PULUMI_MIN_VERSION="([\d.]+)"$/m.exec(
  fs.readFileSync(path.join(PROJECT_ROOT, "engine", "setup.sh"), "utf8"),
)![1];
const atLeast = (have: string, min: string) => {
  const [a, b] = [have, min].map((v) => v.replace(/^v/, "").split(/[.-]/).slice(0, 3).map(Number));
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i] > b[i];
  return true;
};

describe.each(pluginSets())("the real Pulumi engine (%s)", (plugins) => {
  const { work, evidence, opts, pulumi, setUp } = fixtureWorkspace("engine", "program", 240_000, plugins);

  beforeAll(setUp, 120_000);

  afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

  it("runs a CLI the setup accepts", async () => {
    const r = await runPulumi(["version"], opts);
    expect(r.stdout.trim()).toMatch(/^v\d+\.\d+\.\d+/);
    expect(atLeast(r.stdout.trim(), minVersion), `${r.stdout.trim()} >= ${minVersion}`).toBe(true);
  });

  it("runs pulumi up: the command provider runs a shell, the dynamic provider's create runs, on Node >= 22", async () => {
    const up = await pulumi("up", "--yes", "--skip-preview");
    const out = JSON.parse((await pulumi("stack", "output", "--json")).stdout) as {
      greeting: string;
      markerLabel: string;
      programNode: string;
      providerNode: string;
    };
    expect(out.greeting).toBe(`hello from ${os.type()}`);
    expect(out.markerLabel).toBe("marker-1");
    expect(fs.readFileSync(path.join(evidence, "command.out"), "utf8")).toBe(`hello from ${os.type()}`);
    expect(fs.readFileSync(path.join(evidence, "creates.log"), "utf8")).toBe("marker-1\n");
    // the program (language host) and the dynamic provider both ran on a supported Node
    expect(Number(out.programNode.split(".")[0])).toBeGreaterThanOrEqual(22);
    expect(Number(out.providerNode.split(".")[0])).toBeGreaterThanOrEqual(22);
    if (plugins === "stand-ins") expect(up.stdout + up.stderr).not.toMatch(/from \$PATH/);
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
