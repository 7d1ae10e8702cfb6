// How gpuhost reaches a host: over SSH, or on this machine, where a folder may stand for / (the
// host scripts prefix every host path with GPUHOST_ROOT) and a folder of tools may come first on
// PATH (the simulated platform's, sim-host/, hands such a connection over). One zod schema holds
// the shape; values that later reach a shell are restricted to safe patterns here AND quoted
// where they are used. No Pulumi import (exec.ts needs this from dist/ without Pulumi).
import * as path from "node:path";
import { z } from "zod";

/** DNS names and IPv4 addresses; IPv6 literals without brackets. No spaces, quotes or `;`. */
const hostPattern =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*|[0-9A-Fa-f:]*:[0-9A-Fa-f:.]+)$/;
/** POSIX login names as useradd accepts them. */
const userPattern = /^[a-z_][a-z0-9_-]{0,31}$/;

export const hostNameSchema = z
  .string()
  .max(253)
  .regex(hostPattern, "must be a DNS name or an IP address (letters, digits, '.', '-', ':')")
  .describe("Host name or IP address of the SSH server");
export const portSchema = z.number().int().min(1).max(65535).describe("TCP port, 1-65535");
export const userSchema = z
  .string()
  .regex(userPattern, "must be a POSIX user name ([a-z_][a-z0-9_-]*, at most 32 characters)")
  .describe("Login user; commands run through `sudo -n` unless it is root");
const privateKeySchema = z
  .string()
  .min(1)
  .refine((k) => k.includes("PRIVATE KEY"), "must be an OpenSSH/PEM private key (the key text, not a path)")
  .describe("Private key text; keep it a Pulumi secret (`pulumi config set --secret`)");

const hostKeySchema = z
  .string()
  .regex(/^(ssh-|ecdsa-)[A-Za-z0-9-]+ [A-Za-z0-9+/=]+$/, "must be '<type> <base64>' as in known_hosts");

/** Where an SSH login goes and as whom: the same fields, defaults and checks for a host and its bastion. */
const sshLoginShape = {
  host: hostNameSchema,
  port: portSchema.default(22),
  user: userSchema.default("root"),
  privateKey: privateKeySchema,
};

export const bastionSchema = z
  .object({
    ...sshLoginShape,
    hostKey: hostKeySchema
      .optional()
      .describe("The bastion's host key ('ssh-ed25519 AAAA...'), checked strictly; unset, the connection is refused"),
  })
  .strict()
  .describe("Jump host the SSH connection goes through");

export const sshConnectionSchema = z
  .object({
    kind: z.literal("ssh"),
    ...sshLoginShape,
    hostKey: hostKeySchema
      .optional()
      .describe(
        "Expected host key ('ssh-ed25519 AAAA...'), checked strictly; unset, the connection is refused with the key the host presented",
      ),
    bastion: bastionSchema.optional(),
  })
  .strict();

/** A folder path that reaches a shell only quoted: no newlines or NULs. */
const folderSchema = z
  .string()
  .min(1)
  .refine((p) => !/[\n\r\0]/.test(p), "must be a folder path without newlines");

export const localConnectionSchema = z
  .object({
    kind: z.literal("local"),
    root: folderSchema
      .refine((p) => path.resolve(p) !== "/", "must be a folder other than /, without newlines")
      .optional()
      .describe(
        "Folder that stands for / (GPUHOST_ROOT: the host scripts write under it, as the login user, no sudo): absolute, or relative to the program's folder (where Pulumi runs the program and its providers), which keeps the checkout's path out of the state; unset: the machine's own /",
      ),
    toolsDir: folderSchema
      .optional()
      .describe(
        "Folder put first on PATH for the host scripts (tools standing in for apt-get, systemctl & co.); relative to the program's folder, as root",
      ),
  })
  .strict();

export const connectionSchema = z.discriminatedUnion("kind", [sshConnectionSchema, localConnectionSchema]);

export type SshConnection = z.infer<typeof sshConnectionSchema>;
export type LocalConnection = z.infer<typeof localConnectionSchema>;
export type HostConnection = z.infer<typeof connectionSchema>;
export type BastionConnection = z.infer<typeof bastionSchema>;

export class ConnectionConfigError extends Error {
  constructor(readonly issues: { path: string; message: string }[]) {
    super(`invalid host connection:\n${issues.map((i) => `  ${i.path}: ${i.message}`).join("\n")}`);
    this.name = "ConnectionConfigError";
  }
}

/**
 * Validate a connection; errors carry the config path (e.g. `gpuhost:hosts.0.connection.port`).
 * `configPath` is the path of the connection object inside the stack config.
 */
export function parseConnection(value: unknown, configPath = "connection"): HostConnection {
  const result = connectionSchema.safeParse(value);
  if (result.success) return result.data;
  throw new ConnectionConfigError(
    result.error.issues.map((i) => ({ path: [configPath, ...i.path.map(String)].join("."), message: i.message })),
  );
}

/** A short label for logs and outputs: never includes the key. */
export function describeConnection(conn: HostConnection): string {
  switch (conn.kind) {
    case "ssh":
      return `ssh ${conn.user}@${conn.host}:${conn.port}${conn.bastion ? ` via ${conn.bastion.user}@${conn.bastion.host}:${conn.bastion.port}` : ""}`;
    case "local":
      return conn.root === undefined ? "local" : `local ${conn.root}`;
  }
}
