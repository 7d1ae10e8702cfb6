/**
 * The readiness gate's view of one systemd unit over a host connection: its state (`systemctl show`)
 * and its last journal lines. VerifiedGeneration (SSH hosts) and the service comparison (every
 * host: it switches units itself) give these to the gate, whose one check (GateRun.checkService)
 * then ends the wait as soon as systemd reports the unit failed or restarted.
 */
import { parseServiceState } from "../../gate/readiness/service-hooks";
import type { GateHooks } from "../../gate/readiness/verify";
import type { HostConnection } from "./connection";
import { execOnHost } from "./exec";

/** One probe waits at most this long (the gate bounds each call as well). */
const PROBE_TIMEOUT_MS = 30_000;

export function unitHooks(
  connection: HostConnection,
  unit: string,
): Required<Pick<GateHooks, "unit" | "serviceState" | "serviceLogs">> {
  // The unit travels as an argument ("$1"), never inside the script text.
  const onHost = async (script: string) => {
    const r = await execOnHost(connection, script, [unit], {
      timeoutMs: PROBE_TIMEOUT_MS,
      scriptName: "gpuhost-gate-probe",
    });
    if (r.code !== 0) throw new Error(`probe on host failed (exit ${r.code}): ${r.stderr.trim()}`);
    return r.stdout + r.stderr;
  };
  return {
    unit,
    serviceState: async () => parseServiceState(await onHost('systemctl show -p NRestarts,ActiveState -- "$1"')),
    serviceLogs: async () => onHost('journalctl -u "$1" -n 50 --no-pager'),
  };
}
