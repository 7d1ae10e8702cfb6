/**
 * Issue 42 item 5 on the simulated host: the serving port is already held by another process (a
 * listener written here, which accepts connections and says nothing). The stand-in SGLang, run by
 * the simulated host's systemd from a unit as the serving units run it, loads, cannot bind, logs
 * uvicorn's bind error and exits 1 (before: it returned 0 and the unit went inactive); the gate,
 * reading the unit through the host layer's own hooks (unitHooks: `systemctl show`, `journalctl`),
 * ends at its next service check naming the unit and quoting the bind error from the journal,
 * instead of waiting out its deadline (126 s of 120 in the story, naming neither).
 */
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { afterAll, expect, it } from "vitest";
import { execOnHost } from "../../components/host/exec";
import { unitHooks } from "../../components/host/unit-hooks";
import { verify } from "../../gate/index";
import { projectRoot } from "../../project-files";
import { prepareSimulatedHost, simulatedConnection } from "../../sim-host/platform";

const UNIT = "sglang-autoregressive.service";
fs.mkdirSync(path.join(projectRoot(), ".gpuhost", "sim-hosts"), { recursive: true });
const root = fs.mkdtempSync(path.join(projectRoot(), ".gpuhost", "sim-hosts", "port-taken-"));
const connection = simulatedConnection(root);
const sh = async (cmd: string) => {
  const r = await execOnHost(connection, cmd, [], { timeoutMs: 60_000 });
  expect(r.code, r.stderr).toBe(0);
  return r.stdout;
};
const sockets = new Set<net.Socket>();
const holder = net.createServer((s) => {
  sockets.add(s);
  s.on("close", () => sockets.delete(s));
});

afterAll(async () => {
  await execOnHost(connection, `systemctl stop ${UNIT}`, [], { timeoutMs: 60_000 });
  for (const s of sockets) s.destroy();
  await new Promise<void>((resolve) => holder.close(() => resolve()));
  fs.rmSync(root, { recursive: true, force: true });
}, 120_000);

it("a serving port another process holds: the gate names the unit and quotes the bind error, not the deadline", async () => {
  const standin = path.join(projectRoot(), "dist", "simulator", "sglang.js");
  expect(fs.existsSync(standin), `${standin}: compile first (npx tsc -p .)`).toBe(true);
  await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
  const port = (holder.address() as net.AddressInfo).port;
  prepareSimulatedHost(root);
  // The program lives on the simulated host (ExecStart paths are the host's): a wrapper there runs
  // this checkout's stand-in SGLang with this machine's node.
  fs.mkdirSync(path.join(root, "opt/sglang/bin"), { recursive: true });
  fs.writeFileSync(
    path.join(root, "opt/sglang/bin/sglang"),
    `#!/bin/bash\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(standin)} "$@"\n`,
    { mode: 0o755 },
  );
  fs.writeFileSync(
    path.join(root, "etc/systemd/system", UNIT),
    [
      "[Unit]",
      "Description=SGLang (stand-in) on a port another process holds",
      "[Service]",
      "Environment=GPUHOST_SIM_PROFILE=tiny",
      "Environment=GPUHOST_SIM_TIME_SCALE=4",
      `ExecStart=/opt/sglang/bin/sglang --model-path tiny --host 127.0.0.1 --port ${port}`,
      // As the serving units, a crash is restarted after RestartSec; until then the unit is
      // `activating` (auto-restart), and the gate names it once NRestarts rises. 1 s here, not the
      // units' 15: the same verdict, 14 s sooner.
      "Restart=on-failure",
      "RestartSec=1",
      "",
    ].join("\n"),
  );
  await sh(`systemctl daemon-reload && systemctl start ${UNIT}`);
  // The holder never answers: each GET /v1/models waits out its timeout before the service check
  // runs; 1 s each (10 and 5 by default) brings that next check within seconds of the exit.
  const result = await verify(
    { url: `http://127.0.0.1:${port}`, model: "tiny" },
    { deadlineSeconds: 1800, modelsTimeoutSeconds: 1, serviceCheckIntervalSeconds: 1 },
    unitHooks(connection, UNIT),
  );
  expect(result.ready).toBe(false);
  const reason = result.diagnosis!.split("\n")[0];
  expect(reason).toMatch(
    new RegExp(`the service unit ${UNIT.replace(".", "\\.")} (failed|restarted \\d+ time\\(s\\)|is inactive)`),
  );
  expect(reason).toMatch(/error while attempting to bind on address \('127\.0\.0\.1', \d+\): address already in use/);
  expect(reason).not.toContain("deadline");
}, 300_000);
