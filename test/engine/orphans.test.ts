/**
 * Nothing gpuhost starts outlives its engine (issue 19 point 3), and a killed `up` leaves no silent
 * pending operations (point 4). Under the real engine with gpuhost's plugins (the offline stand-ins
 * the setup registered: the upstream plugins are not gpuhost's to change, so this file runs on the
 * stand-ins only), on a fixture whose command and dynamic read hang until a signal:
 * - `pulumi up` under SIGKILL, SIGTERM and SIGINT: the CLI ends, and within a few seconds no process
 *   it started is left (the command provider, the command's own children, the language host, the
 *   program, the dynamic-provider host);
 * - `gpuhost drift` (driftMain with the real engine on the fixture project) under SIGINT and SIGTERM:
 *   exit 130 and nothing left;
 * - after the killed `up`, the stack's pending operation is found and named, with the command that
 *   clears it, and that command clears it.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { driftMain } from "../../cli/drift";
import { clearPendingCommand, pendingOperations, pendingOperationsWarning } from "../../engine/pulumi";
import { engineEnv, pulumiBin, runPulumi } from "../../engine/pulumi";
import { driftProcess, fixtureWorkspace } from "../support/engine";
import { killAll, leftBehind, startUntil } from "../support/processes";

const { work, evidence, opts, stack, pulumi, setUp } = fixtureWorkspace("orphans", "orphan-program", 240_000);

const lines = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter(Boolean) : []);

/** Starts CMD in the test's folder, in a process group of its own; resolves once READY. */
const start = (cmd: string, args: string[], env: NodeJS.ProcessEnv, ready: () => boolean) =>
  startUntil(cmd, args, { cwd: work, env }, ready);

beforeAll(setUp, 120_000);

afterAll(async () => {
  fs.rmSync(path.join(evidence, "hang-reads"), { force: true });
  await pulumi("config", "set", "hang", "false").catch(() => undefined);
  await runPulumi(["destroy", "--yes", "--skip-preview", "--stack", stack], opts).catch(() => undefined);
  fs.rmSync(work, { recursive: true, force: true });
}, 300_000);

describe("pulumi up stopped while a command runs: nothing gpuhost started is left", () => {
  it.each([
    ["SIGTERM", "the CLI"],
    ["SIGINT", "its process group (a terminal's Ctrl-C)"],
    // Last: a killed CLI leaves the stack's lock behind (the next test removes it).
    ["SIGKILL", "the CLI"],
  ] as const)(
    "%s to %s",
    async (signal, target) => {
      await pulumi("config", "set", "hang", "true");
      const started = lines(path.join(evidence, "started")).length;
      const up = await start(
        pulumiBin(),
        ["up", "--yes", "--skip-preview", "--non-interactive", "--stack", stack],
        engineEnv(opts),
        () => lines(path.join(evidence, "started")).length > started,
      );
      try {
        expect([...up.processes.values()].join("\n"), up.out()).toMatch(/command-provider[\s\S]*sleep 600/);
        process.kill(target === "the CLI" ? up.child.pid! : -up.child.pid!, signal);
        expect(await up.ended(), up.out()).not.toBe("hung");
        const left = await leftBehind(up.processes, 8);
        console.log(`[orphans] ${signal} to pulumi up: left ${left.join("; ") || "none"}`);
        expect(left, up.out()).toEqual([]);
      } finally {
        killAll([up.child.pid!, ...up.processes.keys()]);
      }
    },
    240_000,
  );

  it("the killed up's pending create is named with the command that clears it, which clears it", async () => {
    await pulumi("config", "set", "hang", "false");
    // The killed CLI's lock: the engine refuses the next update naming this command.
    await pulumi("cancel", "--yes");
    // A later update that succeeds leaves it in place: the engine keeps it until a refresh.
    await pulumi("up", "--yes", "--skip-preview");
    const ops = await pendingOperations(stack, opts);
    expect(ops).toEqual(
      expect.arrayContaining([{ type: "creating", urn: expect.stringMatching(/::slow$/) as string }]),
    );
    const warning = pendingOperationsWarning(stack, ops)!;
    expect(warning).toContain(`stack ${stack} has ${ops.length} pending operation(s)`);
    expect(warning).toContain("creating slow");
    expect(warning).toContain(clearPendingCommand(stack));
    // gpuhost drift says so on every check, whatever the drift.
    let err = "";
    await driftMain(["--stack", stack], {
      runPulumi: (a, o) => runPulumi(a, { ...opts, ...o, env: { ...opts.env, ...o?.env } }),
      pendingOperations: (s, o) => pendingOperations(s, { ...opts, ...o }),
      out: () => undefined,
      err: (t) => void (err += t),
    });
    expect(err).toContain(`warning: ${warning}`);
    const [bin, ...args] = clearPendingCommand(stack).split(" ");
    expect(bin).toBe("pulumi");
    const cleared = await runPulumi(args, opts);
    expect(cleared.code, cleared.stderr).toBe(0);
    expect(await pendingOperations(stack, opts)).toEqual([]);
    expect(pendingOperationsWarning(stack, [])).toBeUndefined();
  }, 300_000);
});

describe("gpuhost drift stopped during the refresh: exit 130, nothing left", () => {
  it.each(["SIGINT", "SIGTERM"] as const)(
    "%s",
    async (signal) => {
      fs.writeFileSync(path.join(evidence, "hang-reads"), "");
      const reading = lines(path.join(evidence, "reading")).length;
      // driftMain as the real command runs it (its own signal handling), on the fixture's project.
      const driver = driftProcess(stack, opts);
      const drift = await start(
        process.execPath,
        driver.args,
        driver.env,
        () => lines(path.join(evidence, "reading")).length > reading,
      );
      try {
        process.kill(drift.child.pid!, signal);
        const code = await drift.ended();
        expect(code, drift.out()).toBe(130);
        const left = await leftBehind(drift.processes, 8);
        console.log(`[orphans] ${signal} to gpuhost drift: left ${left.join("; ") || "none"}`);
        expect(left, drift.out()).toEqual([]);
      } finally {
        killAll([drift.child.pid!, ...drift.processes.keys()]);
        fs.rmSync(path.join(evidence, "hang-reads"), { force: true });
      }
    },
    240_000,
  );
});
