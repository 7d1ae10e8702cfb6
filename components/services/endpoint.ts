// Where a service is, in the one way every part asks: as seen on its host (ServingService's and the
// Router's `endpoint` outputs), as the gate reaches it from where `pulumi up` runs (VerifiedGeneration,
// ServiceComparison: through a tunnel to an SSH host), and as another machine reaches it (the router
// its workers, `pulumi up` the router: urlSeenFrom). No Pulumi import.

/**
 * The service's URL as seen on the host: a wildcard bind (0.0.0.0) and `localhost` are reached at
 * 127.0.0.1 (a client's `localhost` may resolve to ::1 first, which a server on 127.0.0.1 does not
 * answer); any other address as it is.
 */
export function urlOnHost(bindHost: string, port: number): string {
  const host = bindHost === "0.0.0.0" || bindHost === "localhost" ? "127.0.0.1" : bindHost;
  return `http://${host}:${port}`;
}

/**
 * The URL the gate uses. The gate runs where `pulumi up` runs: for local hosts that is the host
 * itself (127.0.0.1); for SSH hosts the gate reaches the URL as seen on the host through an SSH
 * tunnel (gateTunnel), because the serving port is bound to the host's loopback by default and,
 * as in the story (docs/story.md), a machine that reaches SSH may not reach the serving port.
 */
export function gateUrl(connection: { kind: string }, bindHost: string, port: number): string {
  return connection.kind === "ssh" ? urlOnHost(bindHost, port) : `http://127.0.0.1:${port}`;
}

/** For SSH hosts: the service's address on the host, which the gate's tunnel forwards to; undefined otherwise. */
export function gateTunnel(
  connection: { kind: string },
  bindHost: string,
  port: number,
): { remoteHost: string; remotePort: number } | undefined {
  if (connection.kind !== "ssh") return undefined;
  return { remoteHost: new URL(urlOnHost(bindHost, port)).hostname, remotePort: port };
}

/** A machine as the URL helpers know it: a host entry's name and how it is reached. */
export interface Machine {
  name: string;
  connection: { kind: string; host?: unknown };
}

/** Binds that mean "every address of the machine" (or its loopback): reached from elsewhere at its address. */
const MACHINE_WIDE = new Set(["0.0.0.0", "::", "localhost", "127.0.0.1"]);

/**
 * A service bound to BINDHOST:PORT on machine ON, as seen from FROM (another host entry, or "here":
 * where `pulumi up` runs). A machine seen from itself, and machines that are all this one (simulated
 * and local hosts), see the URL on the host; an SSH host seen from elsewhere is reached at its
 * address (bracketed when IPv6), or at the one address its service is bound to.
 */
export function urlSeenFrom(from: Machine | "here", on: Machine, bindHost: string, port: number): string {
  const thisMachine = (m: Machine | "here") => m === "here" || m.connection.kind !== "ssh";
  const same = (from !== "here" && from.name === on.name) || (thisMachine(from) && thisMachine(on));
  const address = on.connection.host;
  if (same || typeof address !== "string") return urlOnHost(bindHost, port);
  const host = MACHINE_WIDE.has(bindHost) ? address : bindHost;
  return `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
}
