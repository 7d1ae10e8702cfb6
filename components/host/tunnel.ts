// An SSH local forward from this machine to a port on the host, for the readiness gate and the
// benchmark. In the story (docs/story.md) the benchmark machine reached the host over SSH while the serving port
// was another matter: services bind 127.0.0.1 by default, so gpuhost reaches them the way an
// operator would, through the SSH connection it already has. No Pulumi import: the VerifiedGeneration
// provider requires this from dist/components/host/tunnel.js at call time.
import { spawn } from "node:child_process";
import { type HostConnection, parseConnection } from "./connection";
import { HostKeyRefusedError, hostKeyRefusal, sshBaseArgs } from "./exec";
import { secretTempDir } from "./secret-dirs";
import { acceptsConnections, freeLocalPort } from "../../ports";

export interface Tunnel {
  /** Port on 127.0.0.1 of this machine that reaches `remoteHost:remotePort` as seen from the host. */
  localPort: number;
  close(): Promise<void>;
}

/**
 * Opens `ssh -N -L 127.0.0.1:<free>:<remoteHost>:<remotePort>` over the host connection and resolves
 * once the local end accepts connections. ExitOnForwardFailure makes a refused forward an error
 * instead of a tunnel that silently forwards nothing.
 */
export async function openTunnel(
  connection: HostConnection,
  remoteHost: string,
  remotePort: number,
  timeoutMs = 30_000,
): Promise<Tunnel> {
  const conn = parseConnection(connection);
  if (conn.kind !== "ssh") throw new Error(`a tunnel needs an ssh connection, not ${conn.kind}`);
  const secrets = secretTempDir("gpuhost-tunnel-");
  const tmp = secrets.dir;
  const localPort = await freeLocalPort();
  // A forward-only session (-N) has no remote command: the options and user@host alone.
  const base = sshBaseArgs(conn, tmp);
  const child = spawn(
    "ssh",
    ["-N", "-o", "ExitOnForwardFailure=yes", "-L", `127.0.0.1:${localPort}:${remoteHost}:${remotePort}`, ...base],
    {
      stdio: ["ignore", "ignore", "pipe"],
    },
  );
  let stderr = "";
  child.stderr.on("data", (b: Buffer) => {
    stderr += b.toString();
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const close = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      await exited;
    }
    secrets.remove();
  };
  const deadline = Date.now() + timeoutMs;
  while (!(await acceptsConnections(localPort))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      // Read before close(): the keys each hop presented are recorded in the folder close() removes.
      const refused = child.exitCode === 255 ? hostKeyRefusal(conn, tmp, stderr) : undefined;
      await close();
      const failed = `ssh tunnel to ${remoteHost}:${remotePort} on ${conn.user}@${conn.host}:${conn.port} failed`;
      // On a host key, the refusal alone: OpenSSH's banner names only gpuhost's temporary known_hosts.
      if (refused) throw new HostKeyRefusedError(`${failed}: ${refused}`, refused);
      throw new Error(`${failed}: ${stderr.trim() || "timed out"}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { localPort, close };
}
