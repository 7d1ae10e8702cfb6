/**
 * The router's machine as FleetVerification sees it (no Pulumi): the unit and launcher config
 * systemd runs, by sha256, whether the unit is active, and the smg release in its venv, probed over
 * the same host layer as every component (components/host/exec.ts). The router's HTTP API cannot
 * tell a unit edited on the host or a config rewritten by hand; this can. The repair is the Router's
 * own steps, run again with their exact arguments: install (when smg is not the pinned release; it
 * reinstalls only then) and configure, which rewrites both files and restarts the router when they
 * changed or it is not running (components/router/scripts/).
 */
import * as fs from "node:fs";
import { projectFile } from "../../project-files";
import type { Drift } from "../drift/schema";
import { execOnHost } from "../host/exec";
import { RESTART_UNIT_SCRIPT } from "../drift/repair";
import { ROUTER_UNIT, SMG_VERSION } from "../router/render";
import {
  CONFIGURE_ROUTER_SCRIPT,
  INSTALL_ROUTER_SCRIPT,
  PROBE_ROUTER_SCRIPT,
  type RouterHostCheck,
} from "../router/steps";

// Declared beside the steps that write it (the router below fleet verification); re-exported for the
// provider and the component, which read it here with the probe and the repair.
export type { RouterHostCheck };

export interface RouterHostObserved {
  unit: string;
  config: string;
  active: string;
  smg: string;
}

/** probe-router.sh's key=value lines. */
export function parseRouterProbe(stdout: string): RouterHostObserved {
  const get = (key: string) => new RegExp(`^${key}=(.*)$`, "m").exec(stdout)?.[1]?.trim() ?? "";
  return { unit: get("unit"), config: get("config"), active: get("active"), smg: get("smg") };
}

const REPAIR_FILES =
  "pulumi up: FleetVerification runs the Router's configure step again, which rewrites the unit and config and restarts the router from them";

/** How the router's machine differs from what the Router wrote: one Drift entry each, empty when it matches. */
export function routerHostDrift(
  check: Pick<RouterHostCheck, "venvPath" | "unitSha256" | "configSha256">,
  seen: RouterHostObserved,
): Drift[] {
  const out: Drift[] = [];
  const file = (field: string, path: string, found: string, want: string) => {
    if (found !== want)
      out.push({
        field,
        expected: `${path} as gpuhost rendered it (sha256 ${want.slice(0, 12)})`,
        found:
          found === "missing"
            ? `${path} is missing`
            : `${path} differs (sha256 ${found.slice(0, 12)}): edited on the host`,
        repair: REPAIR_FILES,
      });
  };
  file("router.unit", `/etc/systemd/system/${ROUTER_UNIT}`, seen.unit, check.unitSha256);
  file("router.config", "/etc/gpuhost-router/router.json", seen.config, check.configSha256);
  if (seen.active !== "active")
    out.push({
      field: "router.active",
      expected: `${ROUTER_UNIT} active`,
      found: seen.active || "unknown",
      repair: `${REPAIR_FILES} (journalctl -u ${ROUTER_UNIT} says why it stopped)`,
    });
  if (!seen.smg.includes(SMG_VERSION))
    out.push({
      field: "router.venv",
      expected: `smg ${SMG_VERSION} in ${check.venvPath}`,
      found: seen.smg === "missing" ? "smg is missing" : seen.smg || "an unknown smg",
      repair:
        "pulumi up: FleetVerification runs the Router's install step again (smg reinstalled hash-locked), then its configure step",
    });
  return out;
}

async function run(check: RouterHostCheck, script: string, args: string[], timeoutMs: number) {
  const r = await execOnHost(check.connection, fs.readFileSync(projectFile(script), "utf8"), args, {
    scriptName: script.slice(script.lastIndexOf("/") + 1),
    timeoutMs,
  });
  if (r.code !== 0)
    throw new Error(
      `${script.slice(script.lastIndexOf("/") + 1)} on the router's machine ${r.code === 124 ? "timed out" : `exited ${r.code}`}: ${r.stderr.trim().slice(-400)}`,
    );
  return r.stdout;
}

/** Probe the router's machine (read-only, bounded). */
export async function probeRouterHost(check: RouterHostCheck): Promise<Drift[]> {
  return routerHostDrift(check, parseRouterProbe(await run(check, PROBE_ROUTER_SCRIPT, [check.venvPath], 60_000)));
}

/**
 * Put the router's machine back the way the Router left it, if the probe found it drifted: smg
 * reinstalled when it is not the pinned release, then the unit and config rewritten and the router
 * restarted (the configure step restarts it when they changed or it is not running). Returns what it did.
 */
export async function repairRouterHost(check: RouterHostCheck, say: (line: string) => void): Promise<string[]> {
  const drift = await probeRouterHost(check);
  if (drift.length === 0) return [];
  const lines = (ds: Drift[]) => ds.map((d) => `${d.field}: ${d.found ?? "absent"}`).join("; ");
  say(`repairing the router's machine: ${lines(drift)}`);
  const venv = drift.some((d) => d.field === "router.venv");
  if (venv) await run(check, INSTALL_ROUTER_SCRIPT, check.installArgs, 1_800_000);
  let out = await run(check, CONFIGURE_ROUTER_SCRIPT, check.configureArgs, 300_000);
  // A reinstalled smg is not the one the running router loaded: restart it unless configure just did.
  // (the services' restart step: daemon-reload, restart, a fresh activation record).
  if (venv && !/^restarted=true/m.test(out)) out += await run(check, RESTART_UNIT_SCRIPT, [ROUTER_UNIT], 120_000);
  const left = await probeRouterHost(check);
  if (left.length > 0) throw new Error(`the router's machine still differs after its repair: ${lines(left)}`);
  return [
    ...drift.map((d) => `repaired ${d.field}: ${d.found ?? "absent"}`),
    ...out.split("\n").filter((l) => l.startsWith("restarted=")),
  ];
}
