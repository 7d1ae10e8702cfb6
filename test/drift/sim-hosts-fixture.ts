// The golden simulated host as a vitest fixture (kept apart from sim-host.ts, which bench scripts import).
import { afterAll, afterEach, beforeAll } from "vitest";
import type { SimulatedConnection } from "../../sim-host/platform";
import { copyHost, provisionGoldenHost, removeHost } from "./sim-host";

/**
 * For a test file or describe block: provisions the golden host once (beforeAll) and returns `host()`,
 * which hands each test its own copy; copies and the golden host are removed afterwards.
 */
export function useSimulatedHosts(): () => SimulatedConnection {
  let golden: string;
  const hosts: string[] = [];
  beforeAll(async () => {
    golden = await provisionGoldenHost();
  }, 300_000);
  afterAll(() => removeHost(golden));
  afterEach(() => {
    for (const h of hosts.splice(0)) removeHost(h);
  });
  return () => {
    const conn = copyHost(golden);
    hosts.push(conn.root);
    return conn;
  };
}
