/**
 * `npm run demo -- --stack` stopped twice over, or by its terminal closing, leaves its stack usable
 * (issue 25 point 7). Pulumi's first Ctrl-C cancels gracefully; a second one makes it quit at once,
 * leaving the stack's lock, so every later update is refused until `pulumi cancel`. The demo (its
 * runCommand and runPulumi, from dist/, as the real command runs them) runs `pulumi up` under the real
 * engine on a fixture whose command hangs until a signal (test/engine/fixture/orphan-program.ts),
 * and the test sends its process group what a terminal sends: two SIGINTs (a double Ctrl-C), or
 * SIGHUP with the terminal's end of its output gone. Then the next `pulumi up` on the stack must
 * not be refused as locked, and no process the run started may be left.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT, runPulumi } from "../../engine/pulumi";
import { fixtureWorkspace } from "../support/engine";
import { killAll, leftBehind, startUntil } from "../support/processes";

const { work, evidence, opts, stack, pulumi, setUp } = fixtureWorkspace("demo-interrupt", "orphan-program", 240_000);

const started = () => {
  const file = path.join(evidence, "started");
  return fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter(Boolean).length : 0;
};

/** The demo's `--stack` run, as a process of its own (its own signal handling), on the fixture. */
function demo() {
  const driver = `
    const { demoMain } = require(${JSON.stringify(path.join(PROJECT_ROOT, "dist", "cli", "demo.js"))});
    demoMain(["--stack"], JSON.parse(process.env.GPUHOST_TEST_ENGINE_OPTS)).then((code) => process.exit(code));`;
  const env = { ...process.env, GPUHOST_STACK: stack, GPUHOST_TEST_ENGINE_OPTS: JSON.stringify(opts) };
  const before = started();
  return startUntil(process.execPath, ["-e", driver], { cwd: work, env }, () => started() > before);
}

beforeAll(setUp, 120_000);

afterAll(() => {
  fs.rmSync(work, { recursive: true, force: true });
});

describe("the demo's pulumi up stopped by the terminal: the stack is not left locked", () => {
  it.each([
    ["a double Ctrl-C (two SIGINTs to its process group)", false],
    ["a closed terminal (SIGHUP to its process group, its output gone)", true],
  ] as const)(
    "%s",
    async (_, hangup) => {
      await pulumi("config", "set", "hang", "true");
      const run = await demo();
      try {
        expect([...run.processes.values()].join("\n"), run.out()).toMatch(/pulumi[\s\S]*sleep 600/);
        if (hangup) {
          run.child.stdout!.destroy();
          run.child.stderr!.destroy();
          process.kill(-run.child.pid!, "SIGHUP");
        } else {
          process.kill(-run.child.pid!, "SIGINT");
          await new Promise((r) => setTimeout(r, 200));
          try {
            process.kill(-run.child.pid!, "SIGINT");
          } catch (e) {
            // The first Ctrl-C already ended the whole group: the second one finds nobody (ESRCH).
            if ((e as NodeJS.ErrnoException).code !== "ESRCH") throw e;
          }
        }
        const code = await run.ended();
        expect(code, run.out()).not.toBe("hung");
        if (!hangup) expect(code, run.out()).toBe(130);
        const left = await leftBehind(run.processes, 10);
        console.log(`[demo-interrupt] ${hangup ? "SIGHUP" : "two SIGINTs"}: left ${left.join("; ") || "none"}`);
        expect(left, run.out()).toEqual([]);
        // The next update on the stack runs (a preview takes no lock, so it would not tell).
        await pulumi("config", "set", "hang", "false");
        const up = await runPulumi(["up", "--yes", "--skip-preview", "--stack", stack], opts);
        expect(up.stdout + up.stderr).not.toMatch(/currently locked/);
        expect(up.code, up.stdout + up.stderr).toBe(0);
      } finally {
        killAll([run.child.pid!, ...run.processes.keys()]);
      }
    },
    240_000,
  );
});
