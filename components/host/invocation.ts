// The one way a host script is turned into a command line, shared by hostScript (@pulumi/command)
// and execOnHost (dynamic providers). The script travels inside the command as base64, so the
// same text runs for create, delete and probes alike, stdin stays free for the script's own
// tools, and nothing has to be copied to the host first. No Pulumi import.
import { envAssignments, shellJoin, shellQuote } from "./quote";

export interface ScriptInvocation {
  /** The script's text (the content of a real .sh file in the repository). */
  scriptText: string;
  /** $0 inside the script: its file name, for error messages. */
  scriptName: string;
  /** Positional arguments, each quoted into one word. */
  args: readonly string[];
  /** Extra environment, set with `env NAME=value` (never SSH setenv, which sshd usually refuses). */
  environment?: Readonly<Record<string, string>>;
  /** Folder put in front of PATH (the simulated platform's shims). */
  pathPrefix?: string;
  /** Run through `sudo -n` (non-interactive: fails instead of prompting, since there is no PTY). */
  sudo?: boolean;
}

export function renderInvocation(inv: ScriptInvocation): string {
  const encoded = Buffer.from(inv.scriptText, "utf8").toString("base64");
  const env = envAssignments(inv.environment ?? {});
  if (inv.pathPrefix !== undefined) env.push(`PATH=${shellQuote(inv.pathPrefix)}:"$PATH"`);
  const parts = [
    ...(inv.sudo ? ["sudo", "-n"] : []),
    ...(env.length > 0 ? ["env", ...env] : []),
    "bash",
    "-c",
    `"$(printf %s ${encoded} | base64 -d)"`,
    shellQuote(inv.scriptName),
  ];
  const args = shellJoin(inv.args);
  return args.length > 0 ? `${parts.join(" ")} ${args}` : parts.join(" ");
}

/** Whether commands for this login user need sudo (everyone but root does). */
export function needsSudo(user: string | undefined): boolean {
  return user !== undefined && user !== "root";
}
