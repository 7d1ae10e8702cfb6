// The alert rules gpuhost ships for its drift metrics (ops/prometheus/gpuhost-drift.rules.yml), checked
// by Prometheus's own promtool: `check rules` (the file loads, every expression parses) and `test
// rules` on gpuhost-drift.rules.test.yml (each alert fires on given series, and stays quiet where it
// must: drift for less than its `for:`, a fresh timestamp, a skip of one interval). A broken rule
// (here: the Present alert's `for:` removed) makes `test rules` fail, so the test can fail.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { PROJECT_ROOT } from "../../engine/pulumi";
import { promtool, SKIP_PROMTOOL } from "../support/promtool";

const RULES = path.join(PROJECT_ROOT, "ops", "prometheus", "gpuhost-drift.rules.yml");
const RULE_TESTS = path.join(PROJECT_ROOT, "ops", "prometheus", "gpuhost-drift.rules.test.yml");
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-rules-"));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

describe.skipIf(SKIP_PROMTOOL)("the drift alert rules under promtool", () => {
  it("promtool check rules: the file loads, seven rules", async () => {
    const r = await promtool(["check", "rules", RULES]);
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(/SUCCESS: 7 rules found/);
  }, 120_000);

  it("promtool test rules: every alert fires on its series and stays quiet where it must", async () => {
    const r = await promtool(["test", "rules", RULE_TESTS]);
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(/SUCCESS/);
  }, 120_000);

  it("the same unit tests fail on rules whose Present alert lost its `for:` (drift alerting at once)", async () => {
    const doc = parseYaml(fs.readFileSync(RULES, "utf8")) as {
      groups: { rules: { alert: string; for?: string }[] }[];
    };
    const present = doc.groups[0].rules.find((r) => r.alert === "GpuhostDriftPresent")!;
    expect(present.for).toBe("2h");
    delete present.for;
    fs.writeFileSync(path.join(scratch, "gpuhost-drift.rules.yml"), JSON.stringify(doc));
    fs.copyFileSync(RULE_TESTS, path.join(scratch, "gpuhost-drift.rules.test.yml"));
    const r = await promtool(["test", "rules", path.join(scratch, "gpuhost-drift.rules.test.yml")]);
    expect(r.status).not.toBe(0);
    expect(r.stdout + r.stderr).toMatch(/GpuhostDriftPresent/);
  }, 120_000);
});
