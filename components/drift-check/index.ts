/**
 * DriftCheck: `gpuhost drift --stack S --textfile DIR` on a schedule, as a systemd timer and oneshot
 * service on the machine config `operations.driftCheck.machine` names (this one, the router's, a
 * host's, or an operations machine over SSH). Three host steps through the same host layer and the
 * same unit-writing script as the serving units (services/scripts/install-unit.sh):
 *
 *   service unit --\
 *                   +-> enable-timer.sh (metrics folder, enable, restart the timer)
 *   timer unit ----/
 *
 * Each step runs again only when its arguments change, so a second `pulumi up` changes nothing.
 * Destroying the stack removes both units (remove-unit.sh stops and disables them first).
 */
import { createHash } from "node:crypto";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { textfileName } from "../drift/metrics";
import { type HostConnectionInput, hostScript } from "../host/script";
import { unitContentArg, unitInstallStep } from "../services/serving-service";
import {
  driftCheckUnitNames,
  renderDriftCheckService,
  renderDriftCheckTimer,
  type DriftCheckPlace,
  type ResolvedDriftCheck,
} from "./render";
import type { DriftCheckSettings } from "./schema";

export { driftCheckUnitNames, renderDriftCheckService, renderDriftCheckTimer } from "./render";
export { driftCheckSchema, type DriftCheckSettings } from "./schema";

const SERVICE_SCRIPTS = "components/services/scripts";
export const ENABLE_TIMER_SCRIPT = "components/drift-check/scripts/enable-timer.sh";

/** The settings with the machine-dependent defaults taken from where `pulumi up` runs. */
export function resolveDriftCheck(
  settings: DriftCheckSettings,
  here: { stack: string; projectDir: string; nodePath?: string; user?: string },
): ResolvedDriftCheck {
  const place: DriftCheckPlace = {
    stack: settings.stack ?? here.stack,
    projectDir: settings.projectDir ?? here.projectDir,
    nodePath: settings.nodePath ?? here.nodePath ?? process.execPath,
    user: settings.user ?? here.user ?? os.userInfo().username,
  };
  return { ...settings, ...place };
}

/** The two rendered units and the enable step's arguments (pure). */
export function driftCheckPlan(c: ResolvedDriftCheck) {
  const names = driftCheckUnitNames(c.stack);
  const service = renderDriftCheckService(c);
  const timer = renderDriftCheckTimer(c);
  const stamp = createHash("sha256").update(service).update("\0").update(timer).digest("hex");
  return {
    names,
    service,
    timer,
    enableArgs: [names.timer, c.textfileDir, c.user, stamp, c.stack],
  };
}

export interface DriftCheckArgs {
  connection: HostConnectionInput;
  check: ResolvedDriftCheck;
}

export class DriftCheck extends pulumi.ComponentResource {
  /** The timer's unit name on its machine (`systemctl list-timers` shows it). */
  public readonly timer: pulumi.Output<string>;
  /** The metrics file the check writes (node_exporter's textfile collector reads it). */
  public readonly textfile: pulumi.Output<string>;

  constructor(name: string, args: DriftCheckArgs, opts?: pulumi.ComponentResourceOptions) {
    super("gpuhost:index:DriftCheck", name, {}, opts);
    const { connection, check } = args;
    const plan = driftCheckPlan(check);
    const unit = (kind: "service" | "timer", content: string, after: pulumi.Resource[]) => {
      const step = unitInstallStep(plan.names[kind], unitContentArg(content));
      return hostScript(
        `${name}-${kind}`,
        {
          connection,
          script: step.script,
          args: step.args,
          deleteScript: `${SERVICE_SCRIPTS}/remove-unit.sh`,
          deleteArgs: [plan.names[kind]],
        },
        { parent: this, deleteBeforeReplace: true, dependsOn: after },
      );
    };
    const service = unit("service", plan.service, []);
    // Installed after its service and so removed before it on destroy: a timer never names a missing unit.
    const timer = unit("timer", plan.timer, [service]);
    hostScript(
      `${name}-enable`,
      { connection, script: ENABLE_TIMER_SCRIPT, args: plan.enableArgs },
      { parent: this, dependsOn: [service, timer] },
    );
    this.timer = pulumi.output(plan.names.timer);
    this.textfile = pulumi.output(path.posix.join(check.textfileDir, textfileName(check.stack)));
    this.registerOutputs({ timer: this.timer, textfile: this.textfile });
  }
}
