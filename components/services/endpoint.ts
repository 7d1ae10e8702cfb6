// Where the service is, in the one way every part asks: as seen on the host (ServingService's
// `endpoint` output), and as the gate reaches it from where `pulumi up` runs (VerifiedGeneration,
// ServiceComparison). No Pulumi import.

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
