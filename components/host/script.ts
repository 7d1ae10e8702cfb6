// hostScript: run a real .sh file from the repository on a host as a @pulumi/command resource.
// ssh -> remote.Command; local -> local.Command (with the connection's GPUHOST_ROOT and tools
// folder, where it names them). The command line is rendered by invocation.ts (script inside as base64,
// args each quoted, `sudo -n` for non-root users, `env` for variables instead of SSH setenv).
//
// Long installs and dropped SSH sessions: @pulumi/command keeps no session alive and saves no
// failed create, so the next `pulumi up` simply runs the script again. gpuhost's host scripts
// are therefore written to be idempotent and re-runnable from any point (apt/dpkg interrupted
// midway is repaired with `dpkg --configure -a` first), rather than detached with nohup and
// polled: re-running converges, and the error of a failed step reaches `pulumi up` directly.
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import * as command from "@pulumi/command";
import * as pulumi from "@pulumi/pulumi";
import type { HostConnection } from "./connection";
import { localEnvironment, needsSudo, renderInvocation } from "./invocation";

/** A jump host as components take it: its private key and host key may be Pulumi secrets (Outputs). */
export interface BastionInput {
  host: string;
  port: number;
  user: string;
  privateKey: pulumi.Input<string>;
  hostKey?: pulumi.Input<string>;
}

/** A host connection as components take it: the private keys may be Pulumi secrets (Outputs). */
export type HostConnectionInput =
  | (Omit<Extract<HostConnection, { kind: "local" }>, "root"> & {
      /** The folder standing for /; an Input, so another resource (a VM stand-in) can make it. */
      root?: pulumi.Input<string>;
    })
  | (Omit<Extract<HostConnection, { kind: "ssh" }>, "host" | "privateKey" | "bastion" | "hostKey"> & {
      /** The address; an Input, so a host made by another resource (a VM's public IP) can be given. */
      host: pulumi.Input<string>;
      privateKey: pulumi.Input<string>;
      /** The key the host must present (pinned, or recorded on first use: components/host-key). */
      hostKey?: pulumi.Input<string>;
      bastion?: BastionInput;
    });

export interface HostScriptArgs {
  /** Where the script runs. */
  connection: HostConnectionInput;
  /** Path of the .sh file, absolute or relative to the project root. */
  script: string;
  /** Positional arguments ($1...), each passed as one quoted word. */
  args?: pulumi.Input<string>[];
  /** Script run when the resource is deleted (and before a replacement). */
  deleteScript?: string;
  /** Arguments of the delete script. */
  deleteArgs?: pulumi.Input<string>[];
  /** Values whose change replaces the resource (re-runs delete, then create). The script's hash is always added. */
  triggers?: pulumi.Input<unknown>[];
  /** Environment variables for the script (rendered as `env NAME=value`, so sshd's AcceptEnv is irrelevant). */
  environment?: Record<string, pulumi.Input<string>>;
  /**
   * Standard input of the create script. Secrets go here, never into arguments or the environment:
   * a command line is visible to every user of the host (`ps`) while the script runs.
   */
  stdin?: pulumi.Input<string>;
}

export { projectRoot } from "../../project-files";
import { projectRoot } from "../../project-files";

export function readScript(script: string): { text: string; name: string; hash: string } {
  const file = path.isAbsolute(script) ? script : path.join(projectRoot(), script);
  const text = fs.readFileSync(file, "utf8");
  return { text, name: path.basename(file), hash: crypto.createHash("sha256").update(text).digest("hex") };
}

/** A connection whose root is known (the SSH fields may still be Inputs: they are not rendered). */
export type RenderableConnection =
  Exclude<HostConnectionInput, { kind: "local" }> | Extract<HostConnection, { kind: "local" }>;

/** The command line a Command runs for a script, given resolved args (pure; golden-tested). */
export function hostCommandLine(
  conn: RenderableConnection,
  script: { text: string; name: string },
  args: readonly string[],
  environment: Readonly<Record<string, string>> = {},
): string {
  return renderInvocation({
    scriptText: script.text,
    scriptName: script.name,
    args,
    environment,
    ...(conn.kind === "ssh" ? { sudo: needsSudo(conn.user), overSsh: true } : localEnvironment(conn)),
  });
}

function render(
  conn: HostConnectionInput,
  script: { text: string; name: string },
  args: pulumi.Input<string>[],
  environment: Record<string, pulumi.Input<string>>,
): pulumi.Output<string> {
  const root = conn.kind === "local" ? conn.root : undefined;
  return pulumi
    .all([pulumi.all(args), pulumi.all(environment), root])
    .apply(([a, env, r]) => hostCommandLine(conn.kind === "local" ? { ...conn, root: r } : conn, script, a, env));
}

/** The remote.Command connection for an SSH host (the provider marks it secret as a whole). */
export function commandConnection(
  conn: Extract<HostConnectionInput, { kind: "ssh" }>,
): command.types.input.remote.ConnectionArgs {
  return {
    host: conn.host,
    port: conn.port,
    user: conn.user,
    privateKey: pulumi.secret(conn.privateKey),
    hostKey: conn.hostKey,
    dialErrorLimit: 10,
    perDialTimeout: 15,
    proxy: conn.bastion
      ? {
          host: conn.bastion.host,
          port: conn.bastion.port,
          user: conn.bastion.user,
          privateKey: pulumi.secret(conn.bastion.privateKey),
          hostKey: conn.bastion.hostKey,
        }
      : undefined,
  };
}

/**
 * Create the Command resource that runs `args.script` on the host. Returns the resource; its
 * `stdout` is the script's output (scripts print `key=value` lines that components parse).
 */
export function hostScript(
  name: string,
  args: HostScriptArgs,
  opts?: pulumi.CustomResourceOptions,
): command.remote.Command | command.local.Command {
  const script = readScript(args.script);
  const create = render(args.connection, script, args.args ?? [], args.environment ?? {});
  const del = args.deleteScript
    ? render(args.connection, readScript(args.deleteScript), args.deleteArgs ?? [], args.environment ?? {})
    : undefined;
  const deleteHash = args.deleteScript ? readScript(args.deleteScript).hash : "";
  const triggers = [
    `${script.name}:${script.hash}`,
    ...(deleteHash ? [`delete:${deleteHash}`] : []),
    ...(args.triggers ?? []),
  ];
  const conn = args.connection;
  if (conn.kind === "ssh") {
    return new command.remote.Command(
      name,
      {
        connection: commandConnection(conn),
        create,
        delete: del,
        stdin: args.stdin,
        triggers,
        addPreviousOutputInEnv: false,
      },
      opts,
    );
  }
  return new command.local.Command(
    name,
    {
      create,
      delete: del,
      stdin: args.stdin,
      triggers,
      interpreter: ["/bin/sh", "-c"],
      addPreviousOutputInEnv: false,
    },
    opts,
  );
}

/**
 * Whether host scripts on this connection run under a folder standing for / (GPUHOST_ROOT set):
 * they then install nothing from the network (serving-env's python-env.sh), so no hash lock is needed.
 */
export function installsUnderRoot(conn: HostConnectionInput): boolean {
  return conn.kind === "local" && conn.root !== undefined;
}

/** Parse `key=value` lines a host script printed (later keys win; other lines ignored). */
export function parseKeyValues(stdout: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of stdout.split("\n")) {
    const m = /^([A-Za-z_][A-Za-z0-9_.-]*)=(.*)$/.exec(line.trim());
    if (m) out[m[1]] = m[2]!;
  }
  return out;
}
