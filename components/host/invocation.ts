// The one way a host script is turned into a command line, shared by hostScript (@pulumi/command)
// and execOnHost (dynamic providers). The script travels inside the command as base64, so the
// same text runs for create, delete and probes alike, stdin stays free for the script's own
// tools, and nothing has to be copied to the host first. No Pulumi import.
import * as path from "node:path";
import type { LocalConnection } from "./connection";
import { envAssignments, shellJoin, shellQuote } from "./quote";
import { boundToSession } from "./remote-session";

export interface ScriptInvocation {
  /** The script's text (the content of a real .sh file in the repository). */
  scriptText: string;
  /** $0 inside the script: its file name, for error messages. */
  scriptName: string;
  /** Positional arguments, each quoted into one word. */
  args: readonly string[];
  /** Extra environment, set with `env NAME=value` (never SSH setenv, which sshd usually refuses). */
  environment?: Readonly<Record<string, string>>;
  /**
   * Variables whose values are paths: a relative one is relative to the command's working directory
   * and rendered as "$PWD"/<path>, so the command text names no absolute folder (a local
   * connection's root and tools folder: a checkout moved elsewhere runs the same commands, see workdirPath).
   */
  pathEnvironment?: Readonly<Record<string, string>>;
  /** Folder put in front of PATH (a local connection's tools folder); relative as in pathEnvironment. */
  pathPrefix?: string;
  /** Run through `sudo -n` (non-interactive: fails instead of prompting, since there is no PTY). */
  sudo?: boolean;
  /**
   * Run over SSH: the command stops, with all it started, when its SSH session ends
   * (remote-session.ts), whichever provider or client runs it.
   */
  overSsh?: boolean;
}

export function renderInvocation(inv: ScriptInvocation): string {
  const encoded = Buffer.from(inv.scriptText, "utf8").toString("base64");
  const paths = inv.pathEnvironment ?? {};
  // envAssignments checks the names; the values of path variables are then written as path words.
  const pathAssignments = envAssignments(paths).map((a) => {
    const name = a.slice(0, a.indexOf("="));
    return `${name}=${pathWord(paths[name])}`;
  });
  const env = [...envAssignments(inv.environment ?? {}), ...pathAssignments];
  if (inv.pathPrefix !== undefined) env.push(`PATH=${pathWord(inv.pathPrefix)}:"$PATH"`);
  const parts = [
    ...(inv.sudo && !inv.overSsh ? ["sudo", "-n"] : []),
    ...(env.length > 0 ? ["env", ...env] : []),
    "bash",
    "-c",
    `"$(printf %s ${encoded} | base64 -d)"`,
    shellQuote(inv.scriptName),
  ];
  const args = shellJoin(inv.args);
  const line = args.length > 0 ? `${parts.join(" ")} ${args}` : parts.join(" ");
  // Over SSH, sudo comes first, before the session's watch, so the watch is root too.
  return inv.overSsh ? boundToSession(line, inv.sudo === true) : line;
}

/** A path as one shell word: absolute as it is, relative as "$PWD"/<path> (resolved where it runs). */
function pathWord(p: string): string {
  return p.startsWith("/") ? shellQuote(p) : `"$PWD"/${shellQuote(p)}`;
}

/**
 * P relative to this process's working directory when it lies inside it, else P absolute. Pulumi
 * runs the program, the command provider and the dynamic providers in the program's folder, so a
 * path inside that folder is stored relative and the stack survives a move of the folder.
 */
export function workdirPath(p: string): string {
  const abs = path.resolve(p);
  const rel = path.relative(process.cwd(), abs);
  return rel === "" || rel.startsWith("..") || path.isAbsolute(rel) ? abs : rel;
}

/** Whether commands for this login user need sudo (everyone but root does). */
export function needsSudo(user: string | undefined): boolean {
  return user !== undefined && user !== "root";
}

/**
 * How a script runs on a local connection: under its root (GPUHOST_ROOT, the login user's own
 * folder, so no sudo) with its tools folder first on PATH, both relative to the working directory
 * where they lie inside it (workdirPath), so the commands stored in the state name no absolute
 * folder of the checkout; or on the machine's own /, through sudo unless this process is root.
 */
export function localEnvironment(
  conn: LocalConnection,
): Pick<ScriptInvocation, "pathEnvironment" | "pathPrefix" | "sudo"> {
  return {
    pathEnvironment: conn.root === undefined ? undefined : { GPUHOST_ROOT: workdirPath(conn.root) },
    pathPrefix: conn.toolsDir === undefined ? undefined : workdirPath(conn.toolsDir),
    sudo: conn.root === undefined && process.getuid?.() !== 0,
  };
}
