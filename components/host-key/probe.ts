// What key does an SSH server present? Asked the way ssh itself sees it: a real `ssh` connection
// (through the bastion when there is one) with a KnownHostsCommand that records the key the server
// offers and vouches for nothing, so the connection stops at host key verification, before any
// authentication to the target. No Pulumi import: the program, dynamic providers and the command
// provider (engine/offline-plugins/command-provider, its recorder and key checks) use it.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { killProcessGroup } from "../host/process-group";

export interface ProbeHop {
  host: string;
  port: number;
  user: string;
  /** Needed only for a bastion: the probe must log in to it to reach the target behind it. */
  privateKey?: string;
  /** The bastion's key, when known: checked strictly on the way through. */
  hostKey?: string;
}

export interface PresentedKeys {
  /** `<type> <base64>` the target presented, or undefined when it could not be reached. */
  target?: string;
  /** The bastion's, when there is one. */
  bastion?: string;
  /** ssh's error output, for the message when a key is missing. */
  stderr: string;
}

/** The SHA256 fingerprint of a public key line, as `ssh-keygen -l` prints it. */
export function fingerprint(keyLine: string): string {
  const blob = Buffer.from(keyLine.trim().split(/\s+/)[1] ?? "", "base64");
  return `SHA256:${createHash("sha256").update(blob).digest("base64").replace(/=+$/, "")}`;
}

/** `<type> <base64>`: the comparable part of a key line. */
export function keyWords(keyLine: string): string {
  return keyLine.trim().split(/\s+/).slice(0, 2).join(" ");
}

const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * A KnownHostsCommand that records the key the server presents (type and base64) into DIR and vouches
 * for nothing: ssh still decides against its known_hosts file alone. ssh runs it without a shell.
 * The host key probe here and the command provider (engine/offline-plugins/command-provider) both use it.
 */
export function recorder(dir: string, name: string): string {
  const script = path.join(dir, `${name}.record`);
  const out = path.join(dir, `${name}.presented`);
  fs.writeFileSync(script, `#!/bin/sh\n[ -n "$2" ] && printf '%s %s\\n' "$1" "$2" >> ${q(out)}\nexit 0\n`, {
    mode: 0o700,
  });
  return script;
}

/** The last key (`<type> <base64>`) the recorder NAME in DIR saw presented, or undefined when none. */
export function recorded(dir: string, name: string): string | undefined {
  const f = path.join(dir, `${name}.presented`);
  if (!fs.existsSync(f)) return undefined;
  const lines = fs
    .readFileSync(f, "utf8")
    .split("\n")
    .filter((l) => /^\S+ \S+$/.test(l));
  return lines.at(-1);
}

/**
 * The keys the target (and its bastion) present. A bastion without `hostKey` is recorded too, and
 * its key is then taken on this one connection only to reach the target's key exchange: the caller
 * decides what to trust. Bounded by `timeoutMs`.
 */
export async function presentedKeys(
  target: { host: string; port: number },
  bastion?: ProbeHop,
  timeoutMs = 30_000,
): Promise<PresentedKeys> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-hostkey-"));
  try {
    const args = [
      "-T",
      ...recordingOptions(dir, "target", "%", undefined),
      "-o",
      "StrictHostKeyChecking=yes",
      "-p",
      String(target.port),
    ];
    if (bastion) args.push("-o", `ProxyCommand=${jumpCommand(dir, bastion).map(q).join(" ")}`);
    args.push(`gpuhost-hostkey-probe@${target.host}`, "true");
    const stderr = await sshStderr(args, timeoutMs);
    return { target: recorded(dir, "target"), bastion: recorded(dir, "bastion"), stderr: stderr.trim() };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * ssh's options for the hop NAME: only KNOWN (or nothing) in its known_hosts, and the recorder as its
 * KnownHostsCommand. PCT is `%` on ssh's own command line, `%%` inside a ProxyCommand.
 */
function recordingOptions(dir: string, name: string, pct: string, known: string | undefined): string[] {
  const kh = path.join(dir, `${name}.known_hosts`);
  fs.writeFileSync(kh, known ?? "", { mode: 0o600 });
  return [
    "-o",
    "BatchMode=yes",
    "-o",
    "ConnectTimeout=10",
    "-o",
    "LogLevel=ERROR",
    "-o",
    "CheckHostIP=no",
    "-o",
    "GlobalKnownHostsFile=/dev/null",
    "-o",
    `UserKnownHostsFile=${kh}`,
    "-o",
    `KnownHostsCommand=${recorder(dir, name)} ${pct}t ${pct}K`,
  ];
}

/** The ProxyCommand (as argv) that reaches the target through BASTION, recording the bastion's key too. */
function jumpCommand(dir: string, bastion: ProbeHop): string[] {
  const key = path.join(dir, "bastion.key");
  fs.writeFileSync(key, (bastion.privateKey ?? "").replace(/\n?$/, "\n"), { mode: 0o600 });
  const known = bastion.hostKey
    ? `[${bastion.host}]:${bastion.port} ${keyWords(bastion.hostKey)}\n${bastion.host} ${keyWords(bastion.hostKey)}\n`
    : undefined;
  return [
    "ssh",
    ...recordingOptions(dir, "bastion", "%%", known),
    // Unknown bastion key: accepted for this probe only (its key is recorded and returned).
    "-o",
    `StrictHostKeyChecking=${bastion.hostKey ? "yes" : "no"}`,
    "-i",
    key,
    "-o",
    "IdentitiesOnly=yes",
    "-p",
    String(bastion.port),
    "-W",
    "%h:%p",
    `${bastion.user}@${bastion.host}`,
  ];
}

/** Runs ssh with ARGS in its own process group, killed after TIMEOUTMS; what it wrote to stderr. */
function sshStderr(args: string[], timeoutMs: number): Promise<string> {
  return new Promise<string>((resolve) => {
    const child = spawn("ssh", args, { stdio: ["ignore", "ignore", "pipe"], detached: true });
    let err = "";
    child.stderr.on("data", (b: Buffer) => (err += b.toString()));
    const timer = setTimeout(() => {
      killProcessGroup(child);
      err += `\nno answer within ${timeoutMs} ms`;
    }, timeoutMs);
    child.on("error", (e) => {
      clearTimeout(timer);
      resolve(`${err}\n${e.message}`);
    });
    child.on("close", () => {
      clearTimeout(timer);
      resolve(err);
    });
  });
}
