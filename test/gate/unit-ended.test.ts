/**
 * Issue 42 item 5: a unit that ended after it was started ends the gate at its next service check,
 * naming the unit and quoting its journal, instead of costing the whole deadline. The story: a
 * simulator that could not bind its port logged `listen EADDRINUSE` and exited 0, the unit went
 * `inactive`, and the gate waited 126 s of 120 naming neither. Here:
 * - the simulator, as uvicorn does, exits 1 when it cannot bind (in process, and the stand-in `sglang`
 *   as a real child process on a port a real listener holds);
 * - the gate against that real simulator: the unit (its state as the fixture reports it from the
 *   process's exit) is named failed, with the bind error quoted from its log;
 * - the gate with a service-hook double reporting `inactive` (the exit-0 case, which the fixed
 *   simulator no longer produces): before the port ever opened, and after a real HTTP server written
 *   here answered and the unit then ended;
 * - journalQuote: the cause, not systemd's lines after it, is what gets quoted.
 */
import { spawn } from "node:child_process";
import * as http from "node:http";
import * as net from "node:net";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { verify } from "../../gate/index";
import { journalQuote } from "../../gate/readiness/verify";
import { startSimulator } from "../../simulator/index";
import { startSim, tinyVariant, type SimHandle } from "./sim-fixture";

const ROOT = path.join(__dirname, "..", "..");
const UNIT = "sglang-autoregressive.service";
/** A deadline no test here may reach: a verdict that names the deadline is the defect itself. */
const LONG_DEADLINE_S = 600;

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/**
 * A real listener holding a loopback port, as another process would: it accepts connections (the
 * gate's connect succeeds, its GET /v1/models gets no answer) and says nothing.
 */
async function takenPort(): Promise<number> {
  const sockets = new Set<net.Socket>();
  const holder = net.createServer((s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        holder.close(() => resolve());
      }),
  );
  return (holder.address() as net.AddressInfo).port;
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

describe("the simulator exits non-zero when it cannot bind its port, as uvicorn does", () => {
  it("in process (port opened after the load): the bind error in uvicorn's words, then exit 1", async () => {
    const port = await takenPort();
    const logs: string[] = [];
    const exited = new Promise<number>(
      (resolve) =>
        void startSimulator({
          profile: "tiny",
          port,
          timeScale: 20,
          openPortAfterLoad: true,
          log: (l) => logs.push(l),
          onExit: resolve,
        }).then((sim) => cleanups.push(() => sim.close())),
    );
    expect(await exited).toBe(1);
    expect(logs.join("\n")).toContain(
      `ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', ${port}): address already in use (EADDRINUSE)`,
    );
    expect(logs.join("\n")).not.toContain("Uvicorn running");
  });

  it("the stand-in `sglang` as a real process: exit status 1, the bind error on stderr", async () => {
    const port = await takenPort();
    const child = spawn(
      process.execPath,
      ["--import", "tsx", "simulator/sglang.ts", "--model-path", "tiny", "--port", String(port)],
      {
        cwd: ROOT,
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, GPUHOST_SIM_PROFILE: "tiny", GPUHOST_SIM_TIME_SCALE: "20" },
      },
    );
    cleanups.push(() => void (child.exitCode === null && child.signalCode === null && child.kill("SIGKILL")));
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
      child.on("close", (c, s) => resolve([c, s])),
    );
    expect({ code, signal }, stderr).toEqual({ code: 1, signal: null });
    expect(stderr).toMatch(/\[Errno 98\] error while attempting to bind on address .*: address already in use/);
  }, 60_000);
});

describe("the gate ends on a unit that ended after it was started", () => {
  it("the real simulator on a taken port: the unit failed, named with the bind error quoted", async () => {
    const port = await takenPort();
    const sim: SimHandle = await startSim({
      profile: tinyVariant({ load: { minSeconds: 0.5, maxSeconds: 0.5, warmupSeconds: 0.02 } }),
      faults: ["late-port"],
      port,
    });
    cleanups.push(() => sim.close());
    // The holder never answers: each GET /v1/models waits out its timeout before the service check
    // runs; 1 s each (10 and 5 by default) brings that next check within seconds.
    const result = await verify(
      { url: `http://127.0.0.1:${port}`, model: "tiny" },
      { deadlineSeconds: LONG_DEADLINE_S, modelsTimeoutSeconds: 1, serviceCheckIntervalSeconds: 1 },
      { unit: UNIT, serviceState: sim.serviceState, serviceLogs: sim.serviceLogs },
    );
    expect(result.ready).toBe(false);
    expect(sim.exitCode).toBe(1);
    const first = result.diagnosis!.split("\n")[0];
    expect(first).toContain(`the service unit ${UNIT} failed (its process exited with an error)`);
    expect(first).toContain("address already in use");
    expect(first).not.toContain("deadline");
  }, 60_000);

  it("service-hook double: a unit inactive before the port ever opened ends the connect phase, journal quoted", async () => {
    const port = await closedPort();
    const journal = [
      "Dec 06 01:00:00 gpu-1 systemd[1]: Started sglang-autoregressive.service.",
      "Dec 06 01:00:02 gpu-1 sglang[812]: [2026-12-06 01:00:02] Load weight end. type=tiny",
      "Dec 06 01:00:02 gpu-1 sglang[812]: Error: listen EADDRINUSE: address already in use 127.0.0.1:30000",
      "Dec 06 01:00:02 gpu-1 systemd[1]: sglang-autoregressive.service: Deactivated successfully.",
    ].join("\n");
    let checks = 0;
    const result = await verify(
      { url: `http://127.0.0.1:${port}`, model: "tiny" },
      { deadlineSeconds: LONG_DEADLINE_S },
      {
        unit: UNIT,
        // activating at the gate's first check, then the process has returned 0
        serviceState: async () => ({ activeState: checks++ === 0 ? "activating" : "inactive", restarts: 0 }),
        serviceLogs: async () => journal,
      },
    );
    expect(result.ready).toBe(false);
    expect(result.phase).toBe("connect");
    const first = result.diagnosis!.split("\n")[0];
    expect(first).toContain(`the service unit ${UNIT} is inactive after it was started`);
    expect(first).toContain(
      '"Dec 06 01:00:02 gpu-1 sglang[812]: Error: listen EADDRINUSE: address already in use 127.0.0.1:30000"',
    );
    expect(first).not.toContain("deadline");
    expect(result.diagnosis).toContain(`service ${UNIT}: ActiveState=inactive NRestarts=0`);
  });

  it("service-hook double: a server written here answered, then its unit went inactive: ends the models phase", async () => {
    // /v1/models answers 503 (loading) until the unit's state says it ended; the socket stays open,
    // as a port an unrelated process holds would.
    const server = http.createServer((_req, res) => {
      res.writeHead(503, { "content-type": "application/json" });
      res.end('{"error":"loading"}');
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const port = (server.address() as net.AddressInfo).port;
    let checks = 0;
    const result = await verify(
      { url: `http://127.0.0.1:${port}`, model: "tiny" },
      { deadlineSeconds: LONG_DEADLINE_S, serviceCheckIntervalSeconds: 0.3 },
      {
        unit: UNIT,
        serviceState: async () => ({ activeState: ++checks <= 3 ? "active" : "inactive", restarts: 0 }),
        serviceLogs: async () => "sglang[9]: Killed by its own watchdog\nsystemd[1]: Deactivated successfully.",
      },
    );
    expect(result.ready).toBe(false);
    expect(result.phase).toBe("models");
    expect(checks).toBeGreaterThan(3);
    expect(result.diagnosis!.split("\n")[0]).toContain(
      `the service unit ${UNIT} is inactive after it was started (its process ended without an error status, and nothing will open the port); its journal ends: "sglang[9]: Killed by its own watchdog" / "systemd[1]: Deactivated successfully."`,
    );
  }, 60_000);

  it("an active unit is waited for: the same double kept active lets the deadline decide", async () => {
    const port = await closedPort();
    const result = await verify(
      { url: `http://127.0.0.1:${port}`, model: "tiny" },
      { deadlineSeconds: 1 },
      { unit: UNIT, serviceState: async () => ({ activeState: "active", restarts: 0 }), serviceLogs: async () => "" },
    );
    expect(result.ready).toBe(false);
    expect(result.diagnosis!.split("\n")[0]).toContain("the deadline of 1 s passed");
  });
});

describe("journalQuote: the lines that say why the process ended", () => {
  it("the process's last words and systemd's exit line, not the restart's output after it", () => {
    const journal = [
      "-- Boot 1f2e --",
      "a: [2026-12-06 01:00:00] server_args=ServerArgs(...)",
      "a: Traceback (most recent call last):",
      "a: torch.OutOfMemoryError: CUDA out of memory.",
      "systemd[1]: a.service: Main process exited, code=exited, status=1/FAILURE",
      "systemd[1]: a.service: Failed with result 'exit-code'.",
      "systemd[1]: a.service: Scheduled restart job, restart counter is at 1.",
      "a: [2026-12-06 01:00:20] server_args=ServerArgs(...)",
      "",
    ].join("\n");
    expect(journalQuote(journal)).toEqual([
      "a: [2026-12-06 01:00:00] server_args=ServerArgs(...)",
      "a: Traceback (most recent call last):",
      "a: torch.OutOfMemoryError: CUDA out of memory.",
      "systemd[1]: a.service: Main process exited, code=exited, status=1/FAILURE",
    ]);
  });

  it("without an exit line: the last five lines; an empty journal quotes nothing", () => {
    const lines = Array.from({ length: 8 }, (_, i) => `line ${i}`);
    expect(journalQuote(lines.join("\n"))).toEqual(lines.slice(3));
    expect(journalQuote("-- No entries --\n")).toEqual([]);
  });
});
