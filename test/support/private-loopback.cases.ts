/** Functions test/support/private-loopback.test.ts runs in a network namespace of their own. */
import { writeFileSync } from "node:fs";
import { canListen } from "../../ports";
import { socketsOnPort } from "./self-connect";

/** What this process sees of PORT: sockets on it (/proc/net/tcp lines) and whether it can listen there. */
export async function portSeen(port: number): Promise<{ sockets: string[]; listenable: boolean }> {
  return { sockets: socketsOnPort(port), listenable: await canListen(port) };
}

/** Writes this process's pid into FILE and never returns. */
export function hang(file: string): Promise<never> {
  writeFileSync(file, String(process.pid));
  setInterval(() => undefined, 1_000);
  return new Promise<never>(() => undefined);
}
