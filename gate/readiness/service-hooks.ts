/**
 * Gate hooks from command lines: how the host connection reaches the gate. The host layer supplies
 * argv arrays (e.g. ["ssh", "-o", "BatchMode=yes", "root@host", "systemctl show -p NRestarts,ActiveState sglang"]);
 * they run locally, without a shell, so nothing is re-quoted here.
 */
import { execFile } from "node:child_process";
import type { GateHooks, ServiceState } from "./verify";

const OUTPUT_LIMIT = 1024 * 1024;

function run(argv: string[], timeoutMs: number): Promise<{ stdout: string; stderr: string }> {
  if (argv.length === 0) return Promise.reject(new Error("empty command"));
  return new Promise((resolve, reject) => {
    execFile(
      argv[0],
      argv.slice(1),
      { timeout: timeoutMs, maxBuffer: OUTPUT_LIMIT, encoding: "utf8" },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`${argv.join(" ")} failed: ${err.message}${stderr ? `\n${stderr.trim()}` : ""}`));
        else resolve({ stdout, stderr });
      },
    );
  });
}

/** Parses `systemctl show -p NRestarts,ActiveState` output (KEY=value lines, any order). */
export function parseServiceState(text: string): ServiceState {
  const values = new Map<string, string>();
  for (const line of text.split("\n")) {
    const eq = line.indexOf("=");
    if (eq > 0) values.set(line.slice(0, eq).trim(), line.slice(eq + 1).trim());
  }
  const activeState = values.get("ActiveState");
  const restarts = Number(values.get("NRestarts"));
  if (activeState === undefined || activeState === "" || !Number.isInteger(restarts)) {
    throw new Error(`cannot read ActiveState and NRestarts from ${JSON.stringify(text.slice(0, 200))}`);
  }
  return { activeState, restarts };
}

export function commandHooks(opts: {
  serviceStateCommand?: string[];
  serviceLogsCommand?: string[];
  timeoutMs?: number;
}): Pick<GateHooks, "serviceState" | "serviceLogs"> {
  const timeout = opts.timeoutMs ?? 30_000;
  const hooks: Pick<GateHooks, "serviceState" | "serviceLogs"> = {};
  const stateCmd = opts.serviceStateCommand;
  const logsCmd = opts.serviceLogsCommand;
  if (stateCmd && stateCmd.length > 0)
    hooks.serviceState = async () => parseServiceState((await run(stateCmd, timeout)).stdout);
  if (logsCmd && logsCmd.length > 0) {
    hooks.serviceLogs = async () => {
      const { stdout, stderr } = await run(logsCmd, timeout);
      return stdout + stderr;
    };
  }
  return hooks;
}
