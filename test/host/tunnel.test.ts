/**
 * The gate's way to a service bound to a remote host's loopback: an SSH local forward over a real
 * OpenSSH server (on 127.0.0.1, so "the host's loopback" is this machine's), to the real simulator.
 * Also VerifiedGeneration's refresh through it, with the provider loaded from the compiled tree.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as path from "node:path";
import { openTunnel } from "../../components/host/tunnel";
import { startSimulator } from "../../simulator";
import { TestSshd, canRunSshd, startSshd } from "../support/sshd";
import { read } from "../../components/verified-generation/provider";
import { PROJECT_ROOT } from "../../engine/pulumi";
import { expectPlainSentences } from "../support/plain-message";

let sshd: TestSshd;
let sim: { url: string; port: number; close(): Promise<void> };

describe.skipIf(process.env.GPUHOST_SKIP_TESTHOST === "1")("ssh tunnel to a loopback-bound service", () => {
  beforeAll(async () => {
    if (!canRunSshd()) throw new Error("needs root and /usr/sbin/sshd (set GPUHOST_SKIP_TESTHOST=1 to skip knowingly)");
    sshd = await startSshd();
    sim = await startSimulator({ profile: "tiny", port: 0, timeScale: 20, log: () => undefined });
  }, 60_000);
  afterAll(async () => {
    await sim?.close();
    await sshd?.stop();
  });

  const connection = () => ({
    kind: "ssh",
    host: sshd.host,
    port: sshd.port,
    user: "root",
    privateKey: sshd.privateKey,
    hostKey: sshd.hostKey,
  });

  it("forwards a local port to the service and closes cleanly", async () => {
    const t = await openTunnel(connection() as never, "127.0.0.1", sim.port);
    try {
      expect(t.localPort).not.toBe(sim.port);
      const models = (await (await fetch(`http://127.0.0.1:${t.localPort}/v1/models`)).json()) as {
        data: { id: string }[];
      };
      expect(models.data.length).toBeGreaterThan(0);
    } finally {
      await t.close();
    }
    await expect(fetch(`http://127.0.0.1:${t.localPort}/v1/models`)).rejects.toThrow();
  }, 30_000);

  it("fails naming the key the host presented and the one pinned, in plain sentences (not OpenSSH's banner)", async () => {
    const wrongKey = {
      ...connection(),
      hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHn4bVX1nZt0G5u9i4S2o9pC1VjV1t2pA0v6tO3nB7hM",
    };
    const err = await openTunnel(wrongKey as never, "127.0.0.1", sim.port, 10_000).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err?.message).toMatch(
      /^ssh tunnel .* failed: 127\.0\.0\.1:\d+ presented ssh-ed25519 SHA256:\S+, but hostKey pins ssh-ed25519 SHA256:\S+: refused, nothing was run\./,
    );
    expectPlainSentences(err!.message);
  }, 30_000);

  it("VerifiedGeneration's refresh reaches the service through the tunnel", async () => {
    const models = (await (await fetch(`${sim.url}/v1/models`)).json()) as { data: { id: string }[] };
    const props = {
      projectRoot: PROJECT_ROOT,
      providerVersion: "1",
      // The URL as seen on the host; only the tunnel reaches it from here.
      endpoint: { url: `http://127.0.0.1:${sim.port}`, model: models.data[0].id },
      hostAccess: {
        connection: connection(),
        unit: "sglang-autoregressive.service",
        remoteHost: "127.0.0.1",
        remotePort: sim.port,
      },
      verifyPolicy: { thinkingToggle: true },
    };
    const r = await read("id", props);
    expect(r.props.generating).toBe(true);
    expect(path.isAbsolute(PROJECT_ROOT)).toBe(true);
  }, 60_000);
});
