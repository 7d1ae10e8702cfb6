// examples/ci/drift-check.yml, the scheduled CI drift check for a stack in a cloud backend (issue 27):
// parsed with the `yaml` package as a workflow (a cron schedule, `npm ci`), every gpuhost command in
// its scripts run through gpuhost's own argv parser (cli/options.ts, on `gpuhost drift`'s flag
// table), so a renamed or removed flag fails here; the backend's credentials only in the
// environment, never on a command line; every exit status it names is one gpuhost drift has.
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { DRIFT } from "../../cli/drift";
import { parseFlags } from "../../cli/options";
import { DRIFT_OUTCOMES } from "../../components/drift/outcome";
import { PROJECT_ROOT } from "../../engine/pulumi";

interface Workflow {
  on: { schedule: { cron: string }[] };
  jobs: Record<string, { env?: Record<string, string>; steps: { run?: string; env?: Record<string, string> }[] }>;
}

const text = fs.readFileSync(path.join(PROJECT_ROOT, "examples", "ci", "drift-check.yml"), "utf8");
const workflow = parseYaml(text) as Workflow;
const steps = Object.values(workflow.jobs).flatMap((j) => j.steps);
const scripts = steps.flatMap((s) => (s.run ? [s.run] : []));

/** The argv after `gpuhost drift` in every script line that runs it, the shell's quotes taken off. */
const driftCommands = scripts
  .flatMap((s) => s.split("\n"))
  .flatMap((line) => {
    const m = /(?:npx gpuhost|npm run --silent gpuhost --) drift (.*)$/.exec(line.trim());
    return m ? [m[1].split(/\s+/).map((w) => w.replace(/^"(.*)"$/, "$1"))] : [];
  });

describe("examples/ci/drift-check.yml", () => {
  it("a scheduled workflow: a five-field cron, npm ci, one gpuhost drift --textfile", () => {
    expect(workflow.on.schedule.map((s) => s.cron.split(" ").length)).toEqual([5]);
    expect(scripts).toContain("npm ci");
    expect(driftCommands).toHaveLength(1);
    expect(driftCommands[0]).toContain("--textfile");
  });

  it("its gpuhost drift command line parses under gpuhost drift's own flag table", () => {
    for (const argv of driftCommands) {
      const values = parseFlags(DRIFT.flags, argv) as Record<string, unknown>;
      expect(values.stack).toBe("$GPUHOST_STACK");
      expect(values.textfile).toBe("drift-metrics");
    }
    // the check can fail: a flag gpuhost drift does not have is refused by the same parser
    expect(() => parseFlags(DRIFT.flags, [...driftCommands[0], "--no-such-flag"])).toThrow(/--no-such-flag/);
  });

  it("credentials come from secrets into the environment, never onto a command line", () => {
    const env = Object.values(workflow.jobs)[0].env ?? {};
    expect(env.PULUMI_ACCESS_TOKEN).toBe("${{ secrets.PULUMI_ACCESS_TOKEN }}");
    expect(env.PULUMI_CONFIG_PASSPHRASE).toBe("${{ secrets.PULUMI_CONFIG_PASSPHRASE }}");
    for (const s of scripts) expect(s).not.toMatch(/secrets\.|PULUMI_ACCESS_TOKEN|PASSPHRASE|pulumi login/);
  });

  it("it tells drift from a failed check by gpuhost drift's own exit statuses", () => {
    const check = scripts.find((s) => s.includes(" drift "))!;
    const handled = [...check.matchAll(/^\s*(\d+)\)/gm)].map((m) => Number(m[1]));
    const codes = Object.values(DRIFT_OUTCOMES).map((o) => o.code);
    expect(handled).toEqual([
      DRIFT_OUTCOMES.clean.code,
      DRIFT_OUTCOMES.drift.code,
      DRIFT_OUTCOMES.locked.code,
      DRIFT_OUTCOMES.paused.code,
    ]);
    for (const c of handled) expect(codes).toContain(c);
    expect(check).toMatch(/\*\) echo "::error::the drift check failed/);
  });
});
