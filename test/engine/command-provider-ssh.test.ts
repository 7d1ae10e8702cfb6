/** Remote commands through a real OpenSSH server on loopback: host key checking, stdin, environment, dial retries. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REMOTE, provider } from "../../engine/command-provider/provider";
import { TestSshd, canRunSshd, startSshd } from "../support/sshd";

const urn = `urn:pulumi:s::p::${REMOTE}::r`;
let sshd: TestSshd;

// Like the test-host suites: a machine that cannot run sshd fails loudly unless GPUHOST_SKIP_TESTHOST=1.
describe.skipIf(process.env.GPUHOST_SKIP_TESTHOST === "1")("command provider over a real SSH server", () => {
  beforeAll(async () => {
    if (!canRunSshd())
      throw new Error("these tests need root and /usr/sbin/sshd (set GPUHOST_SKIP_TESTHOST=1 to skip them knowingly)");
    sshd = await startSshd();
  });
  afterAll(async () => {
    await sshd?.stop();
  });

  const conn = () => ({
    host: sshd.host,
    port: sshd.port,
    user: "root",
    privateKey: sshd.privateKey,
    hostKey: sshd.hostKey,
    dialErrorLimit: 2,
    perDialTimeout: 5,
  });

  it("runs the command on the host with stdin and environment, checking the host key", async () => {
    const r = await provider.create(urn, {
      connection: conn(),
      create: 'read -r line; echo "$line/$GREETING/$(id -un)"',
      stdin: "from-stdin\n",
      environment: { GREETING: "it's me" },
    });
    expect(r.outs.stdout).toBe("from-stdin/it's me/root");
  }, 30_000);

  it("refuses a host whose key does not match", async () => {
    const wrong = {
      ...conn(),
      hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHn4bVX1nZt0G5u9i4S2o9pC1VjV1t2pA0v6tO3nB7hM",
    };
    await expect(provider.create(urn, { connection: wrong, create: "true" })).rejects.toThrow(/exit status 255/);
  }, 30_000);

  it("gives up after dialErrorLimit attempts on a closed port", async () => {
    const closed = { ...conn(), port: 1, dialErrorLimit: 2 };
    await expect(provider.create(urn, { connection: closed, create: "true" })).rejects.toThrow(/dial failed 2 times/);
  }, 30_000);
});
