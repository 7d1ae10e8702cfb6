// The drift check's two units as plain text (pure, unit-tested): a oneshot service running
// `gpuhost drift --stack S --textfile DIR` and the timer that starts it. Every configured value is
// escaped for the directive it lands in by the one systemd syntax module the services use
// (services/systemd-syntax.ts): systemd's own quoting, never a shell's.
import * as fs from "node:fs";
import * as path from "node:path";
import { projectFile } from "../../project-files";
import { exitCodeOfOutcome, HELD_OUTCOMES } from "../drift/outcome";
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

/**
 * ExecStartPre='s check that the CLI is there. Node's own "Cannot find module" exits 1, which the
 * service takes for "drift found" (SuccessExitStatus=1 holds for ExecStartPre= too): a project that
 * moved, an unbuilt dist/ or a folder the service cannot see would pass as a verdict. Status 2 fails
 * the unit (node_exporter's systemd collector: GpuhostDriftCheckUnitFailed), node's message in its journal.
 */
const CLI_PRESENT = "try { require.resolve(process.argv[1]) } catch (e) { console.error(e.message); process.exit(2) }";

/** The folders PrivateTmp=yes replaces with the service's own empty ones. */
const PRIVATE_TMP_DIRS = ["/tmp", "/var/tmp"];

const underPrivateTmp = (p: string) => PRIVATE_TMP_DIRS.some((d) => p === d || p.startsWith(`${d}/`));

/**
 * BindPaths= / BindReadOnlyPaths= lines for what the check needs under /tmp or /var/tmp (a project
 * cloned into a `mktemp -d` folder): PrivateTmp=yes gives the service its own empty /tmp and
 * /var/tmp, and systemd mounts a bind of a path below them after them, so the host's folder is seen
 * at the same path (test/testhost/drift-timer.test.ts checks it under real systemd). Nothing outside
 * those two folders is bound: the service sees it as the host does.
 */
export function privateTmpBinds(c: ResolvedDriftCheck): string {
  const fileBackend = c.backendUrl?.startsWith("file:///") ? c.backendUrl.slice("file://".length) : undefined;
  type Need = [field: string, path: string, readOnly: boolean];
  const needed: Need[] = [
    ["projectDir", c.projectDir, false],
    ["nodePath", path.posix.dirname(c.nodePath), true],
    ["textfileDir", c.textfileDir, false],
    ...(fileBackend ? [["backendUrl", fileBackend, false] satisfies Need] : []),
  ];
  return needed
    .filter(([, p]) => underPrivateTmp(p))
    .map(([field, p, readOnly]) => {
      // BindPaths= takes ':' as its separator and does not unquote as ExecStart= does.
      if (!/^\/[A-Za-z0-9._+@/-]*$/.test(p) || p.split("/").includes(".."))
        throw new Error(
          `gpuhost:operations.driftCheck.${field} ${JSON.stringify(p)} lies under ${PRIVATE_TMP_DIRS.join(" or ")}, which the check's service sees only through BindPaths= (it runs with PrivateTmp=yes), and BindPaths= takes only paths of letters, digits and ._+@-/: move it, or use such a path`,
        );
      return `${readOnly ? "BindReadOnlyPaths" : "BindPaths"}=${p}\n`;
    })
    .join("");
}

/** The check's exits that are no failure of the unit: the drift verdict and the held outcomes. */
export const SUCCESS_EXIT_STATUSES: readonly number[] = [
  exitCodeOfOutcome("drift"),
  ...HELD_OUTCOMES.map((o) => exitCodeOfOutcome(o)),
];

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
    execStartPre: renderExecLine([c.nodePath, "-e", CLI_PRESENT, driftCheckCommand(c)[1]]),
    execStart: renderExecLine(driftCheckCommand(c)),
    privateTmpBinds: privateTmpBinds(c),
    timeoutSec: String(c.timeoutSec),
    successExitStatus: SUCCESS_EXIT_STATUSES.join(" "),
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
