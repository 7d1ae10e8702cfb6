// The drift check's two units as plain text (pure, unit-tested): a oneshot service running
// `gpuhost drift --stack S --textfile DIR` and the timer that starts it. Every configured value is
// escaped for the directive it lands in by the one systemd syntax module the services use
// (services/systemd-syntax.ts): systemd's own quoting, never a shell's.
import * as fs from "node:fs";
import * as path from "node:path";
import { projectFile } from "../../project-files";
import { fillTemplate } from "../services/unit";
import {
  credentialName,
  quoteEnvironmentAssignment,
  renderExecLine,
  unitPath,
  unitText,
} from "../services/systemd-syntax";
import type { DriftCheckSettings } from "./schema";

/** The credential id the passphrase file is handed over as (`%d/<id>` in the service). */
export const PASSPHRASE_CREDENTIAL = "pulumi-passphrase";

/** What the machine-independent defaults resolve to where `pulumi up` runs (the component fills them in). */
export interface DriftCheckPlace {
  stack: string;
  projectDir: string;
  nodePath: string;
  user: string;
}

export type ResolvedDriftCheck = Omit<DriftCheckSettings, keyof DriftCheckPlace> & DriftCheckPlace;

/**
 * The units' base name: one pair per stack, so two stacks can be checked from one machine. A stack
 * name's characters are all legal in a unit name except `/` (org/project/stack), written `--`.
 */
export function driftCheckUnitBase(stack: string): string {
  return `gpuhost-drift-check-${stack.replaceAll("/", "--")}`;
}

export function driftCheckUnitNames(stack: string): { service: string; timer: string } {
  const base = driftCheckUnitBase(stack);
  return { service: `${base}.service`, timer: `${base}.timer` };
}

const template = (name: string) =>
  fs.readFileSync(projectFile(`components/drift-check/units/gpuhost-drift-check.${name}.tmpl`), "utf8");

/** The CLI as the service runs it: the project's compiled entry under the configured node. */
export function driftCheckCommand(c: ResolvedDriftCheck): string[] {
  return [
    c.nodePath,
    path.posix.join(c.projectDir, "dist", "cli", "gpuhost.js"),
    "drift",
    "--stack",
    c.stack,
    "--textfile",
    c.textfileDir,
  ];
}

export function renderDriftCheckService(c: ResolvedDriftCheck, text = template("service")): string {
  const names = driftCheckUnitNames(c.stack);
  if (!/^[a-z_][a-z0-9_-]{0,31}$/.test(c.user))
    throw new Error(`user must be a plain system user name, got ${JSON.stringify(c.user)}`);
  const environment: Array<[string, string]> = [
    // The engine starts its Node.js language host from PATH: the same node as the CLI's, first.
    ["PATH", `${path.posix.dirname(c.nodePath)}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`],
    ...(c.backendUrl ? ([["PULUMI_BACKEND_URL", c.backendUrl]] as Array<[string, string]>) : []),
  ];
  return fillTemplate(text, {
    serviceName: names.service,
    timerName: names.timer,
    stackText: unitText(c.stack),
    textfileText: unitText(c.textfileDir),
    user: c.user,
    environmentLines: `Environment=${environment.map(([k, v]) => quoteEnvironmentAssignment(k, v)).join(" ")}\n`,
    credentialLines: c.passphraseFile
      ? [
          // Why a credential and not Environment= or an EnvironmentFile=: an environment variable is
          // inherited by every process the check starts (the engine, its plugins, ssh) and readable in
          // /proc/<pid>/environ; a credential is a copy of the root-only file in a folder only this
          // unit's user can read (%d), which Pulumi reads itself through PULUMI_CONFIG_PASSPHRASE_FILE.
          // The passphrase is in no unit file, argv or environment.
          `LoadCredential=${credentialName(PASSPHRASE_CREDENTIAL)}:${unitPath("passphraseFile", c.passphraseFile)}`,
          `Environment=PULUMI_CONFIG_PASSPHRASE_FILE=%d/${PASSPHRASE_CREDENTIAL}`,
          "",
        ].join("\n")
      : "",
    execStart: renderExecLine(driftCheckCommand(c)),
    timeoutSec: String(c.timeoutSec),
  });
}

export function renderDriftCheckTimer(c: ResolvedDriftCheck, text = template("timer")): string {
  const names = driftCheckUnitNames(c.stack);
  // The schema allows only calendar characters; checked again here, where the text is written.
  if (!/^[A-Za-z0-9*:.,/~+ -]+$/.test(c.onCalendar))
    throw new Error(`onCalendar is not a calendar expression: ${JSON.stringify(c.onCalendar)}`);
  return fillTemplate(text, {
    serviceName: names.service,
    timerName: names.timer,
    stackText: unitText(c.stack),
    onCalendar: c.onCalendar,
    randomizedDelaySec: String(c.randomizedDelaySec),
    persistent: c.persistent ? "true" : "false",
  });
}
