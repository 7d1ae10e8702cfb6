/**
 * Nothing gpuhost starts outlives an interrupted run, on this machine or on the host (issue 19
 * point 3), over SSH on the real Debian test host with the real program under the real engine (the
 * sim-stack version is test/engine/orphans.test.ts). One host and one stack, in order:
 * - `pulumi up` stopped by SIGTERM, SIGINT (to its process group: a terminal's Ctrl-C) and SIGKILL
 *   while the toolkit's install step runs on the host over SSH: apt waits in a `DPkg::Pre-Invoke`
 *   hook (an apt option a host may carry), so install.sh, apt-get and the hook run on the host under
 *   the command provider's ssh client here;
 * - the next `up` (the hook gone) converges;
 * - `gpuhost drift` stopped by SIGINT and SIGTERM while ToolkitState's probe runs on the host (its
 *   `nvcc --version` does not return: a stand-in that sleeps), under the dynamic provider's ssh client;
 * - `pulumi up` killed (SIGKILL) while the gate waits on a service that never answers, through its
 *   SSH tunnel; the next up converges.
 * Afterwards: no process the run started is left here (CLI, language host, program, command provider,
 * dynamic-provider host, ssh clients and tunnels), and no SSH session's process is left on the host.
 */
import { promises as fs, readFileSync } from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { engineEnv, pulumiBin } from "../../engine/pulumi";
import { driftProcess } from "../support/engine";
import { descendants, killAll, leftBehind, startUntil, type Started } from "../support/processes";
import { requireTestHost } from "./harness";
import { hostLeftBehind, hostSessionProcesses } from "./host-processes";
import { writeStandinSglangConfig } from "./simulator-install";
import { STACK, startTestHostFixture, TestHostFixture } from "./testhost-stack";

const enabled = requireTestHost();
const STEP = 10 * 60_000;
/** Where the hanging step writes a line when it starts waiting: on the host, read here through its tree. */
const MARK = "/var/tmp/gpuhost-test-hang";
const APT_HOOK = "/etc/apt/apt.conf.d/99gpuhost-test-hang";
const NVCC = "/usr/local/cuda-13.0/bin/nvcc";

describe.runIf(enabled)("testhost stack: an interrupted run leaves nothing, here or on the host", () => {
  let f: TestHostFixture;
  const onHost = (p: string) => path.join(f.host.rootDir, p.slice(1));
  /** How many times a hanging step started waiting so far. */
  const marks = () => {
    try {
      return readFileSync(onHost(MARK), "utf8").split("\n").filter(Boolean).length;
    } catch {
      return 0;
    }
  };

  /** Signals RUN (its CLI, or its process group) and checks that it ends and leaves nothing anywhere. */
  async function stopAndCheck(
    run: Started,
    signal: NodeJS.Signals,
    target: "process" | "group",
    what: string,
    running: { here: RegExp; onHost?: RegExp } = { here: /^ssh /m, onHost: /sleep 600/ },
  ) {
    const onHostBefore = [...(await hostSessionProcesses(f.host)).values()].join("\n");
    try {
      // The step really runs (on the host, under an ssh client of this machine).
      if (running.onHost) expect(onHostBefore, run.out()).toMatch(running.onHost);
      expect([...run.processes.values()].join("\n"), run.out()).toMatch(running.here);
      process.kill(target === "process" ? run.child.pid! : -run.child.pid!, signal);
      const code = await run.ended();
      expect(code, run.out()).not.toBe("hung");
      const here = await leftBehind(run.processes, 8);
      // The host's watch on a session gives its command SESSION_KILL_GRACE_SECONDS after SIGTERM.
      const there = await hostLeftBehind(f.host, 15);
      console.log(
        `[orphans] ${signal} to ${what}: left here ${here.join("; ") || "none"}; on the host ${there.join("; ") || "none"}`,
      );
      expect(here, run.out()).toEqual([]);
      expect(there, onHostBefore).toEqual([]);
      return code;
    } finally {
      killAll([run.child.pid!, ...run.processes.keys()]);
      const left = [...(await hostSessionProcesses(f.host)).keys()];
      if (left.length > 0) await f.host.exec(`kill -KILL ${left.join(" ")}`);
    }
  }

  /**
   * The later cases signal runs on a converged stack. When an earlier case left it unconverged (its
   * own failure is reported there), this converges it, so each case's result is its own and not a
   * cascade of "no ToolkitState resource in this stack".
   */
  async function ensureConverged(before: string) {
    const hosts = (await f.stack.outputs().catch(() => ({}))) as {
      gpuHosts?: Record<string, { generating?: unknown }>;
    };
    if (hosts.gpuHosts?.testhost?.generating === true) return;
    console.log(`[orphans] the stack had not converged before ${before}: converging it first`);
    await f.stack.pulumi("cancel", "--yes");
    await f.stack.pulumiOk("up", "--yes", "--skip-preview");
  }

  beforeAll(async () => {
    f = await startTestHostFixture("orphans");
  }, 30 * 60_000);

  afterAll(async () => {
    await f?.stop();
  }, 120_000);

  describe("pulumi up stopped while apt runs on the host", () => {
    beforeAll(async () => {
      await fs.writeFile(
        onHost(APT_HOOK),
        `// written by test/testhost/orphans.test.ts: apt waits here before it runs dpkg\nDPkg::Pre-Invoke { "echo $$ >>${MARK}; exec sleep 600"; };\n`,
      );
    });

    it.each([
      ["SIGTERM", "process"],
      ["SIGINT", "group"],
      // Last: a killed CLI leaves the stack's lock behind (the converging up removes it).
      ["SIGKILL", "process"],
    ] as const)(
      "%s to the %s of pulumi up: it ends, nothing is left here or on the host",
      async (signal, target) => {
        const before = marks();
        const up = await startUntil(
          pulumiBin(),
          ["up", "--yes", "--skip-preview", "--non-interactive", "--stack", STACK],
          { cwd: f.stack.dir, env: engineEnv(f.stack.opts), boundMs: 8 * 60_000 },
          () => marks() > before,
        );
        await stopAndCheck(up, signal, target, `the ${target} of pulumi up`);
      },
      STEP,
    );

    it(
      "the next pulumi up, the hook gone, converges",
      async () => {
        await fs.rm(onHost(APT_HOOK));
        // The killed CLI's lock: the engine refuses the next update naming this command.
        await f.stack.pulumiOk("cancel", "--yes");
        await f.stack.pulumiOk("up", "--yes", "--skip-preview");
        const out = (await f.stack.outputs()).gpuHosts as Record<string, Record<string, unknown>>;
        expect(out.testhost.generating).toBe(true);
        expect((await f.host.execOk("dpkg --audit")).stdout.trim()).toBe("");
      },
      STEP,
    );
  });

  describe("gpuhost drift stopped while ToolkitState's probe runs on the host", () => {
    beforeAll(async () => {
      await ensureConverged("gpuhost drift is stopped");
      // NVIDIA's nvcc moved aside; the stand-in never answers `nvcc --version`.
      await f.host.execOk(
        `mv ${NVCC} ${NVCC}.gpuhost-test && printf '#!/bin/sh\\necho $$ >>${MARK}\\nexec sleep 600\\n' >${NVCC} && chmod 0755 ${NVCC}`,
      );
    }, STEP);

    afterAll(async () => {
      await f?.host.exec(`mv ${NVCC}.gpuhost-test ${NVCC}`);
    }, 60_000);

    it.each(["SIGINT", "SIGTERM"] as const)(
      "%s: exit 130, nothing is left here or on the host",
      async (signal) => {
        const before = marks();
        const driver = driftProcess(STACK, f.stack.opts);
        const drift = await startUntil(
          process.execPath,
          driver.args,
          { cwd: f.stack.dir, env: driver.env, boundMs: 5 * 60_000 },
          () => marks() > before,
        );
        expect(await stopAndCheck(drift, signal, "process", "gpuhost drift")).toBe(130);
      },
      STEP,
    );
  });

  describe("pulumi up killed while the gate waits on the host's service", () => {
    const standin = (faults: string[]) =>
      writeStandinSglangConfig(f.host.rootDir, { profiles: { default: "tiny" }, timeScale: 1, faults });

    beforeAll(async () => {
      await ensureConverged("pulumi up is killed in the gate");
      // The service accepts connections and never answers; a changed benchmark plan verifies it again.
      await standin(["silent"]);
      await f.host.execOk("systemctl restart sglang-autoregressive.service");
      await f.stack.setConfig({ benchmark: { requestsPerConcurrency: 2 } });
    }, STEP);

    it(
      "SIGKILL to pulumi up: the tunnel, the dynamic provider and the rest are gone; nothing is left on the host",
      async () => {
        const up = await startUntil(
          pulumiBin(),
          // Without the refresh, whose check of the service would open the first tunnel.
          ["up", "--yes", "--skip-preview", "--non-interactive", "--refresh=false", "--stack", STACK],
          { cwd: f.stack.dir, env: engineEnv(f.stack.opts), boundMs: 5 * 60_000 },
          // The gate polls the service through its SSH tunnel.
          (pid) => [...descendants(pid).values()].some((c) => /^ssh -N /.test(c)),
        );
        await stopAndCheck(up, "SIGKILL", "process", "pulumi up in the gate", { here: /^ssh -N /m });
      },
      STEP,
    );

    it(
      "the next pulumi up, the service answering again, converges",
      async () => {
        await standin([]);
        await f.host.execOk("systemctl restart sglang-autoregressive.service");
        await f.stack.pulumiOk("cancel", "--yes");
        await f.stack.pulumiOk("up", "--yes", "--skip-preview");
        const out = (await f.stack.outputs()).gpuHosts as Record<string, Record<string, unknown>>;
        expect(out.testhost.generating).toBe(true);
      },
      STEP,
    );
  });
});
