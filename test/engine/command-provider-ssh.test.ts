/**
 * Remote commands through a real OpenSSH server on loopback: host key checking, stdin, environment (as
 * upstream: SSH environment requests, refused by a server without AcceptEnv), dial retries.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REMOTE, provider, withSecretCredentials } from "../../engine/command-provider/provider";
import { TestSshd, canRunSshd, startSshd } from "../support/sshd";

const urn = `urn:pulumi:s::p::${REMOTE}::r`;
let sshd: TestSshd;
let accepting: TestSshd;

// Like the test-host suites: a machine that cannot run sshd fails loudly unless GPUHOST_SKIP_TESTHOST=1.
describe.skipIf(process.env.GPUHOST_SKIP_TESTHOST === "1")("command provider over a real SSH server", () => {
  beforeAll(async () => {
    if (!canRunSshd())
      throw new Error("these tests need root and /usr/sbin/sshd (set GPUHOST_SKIP_TESTHOST=1 to skip them knowingly)");
    sshd = await startSshd();
    accepting = await startSshd(["AcceptEnv GREETING"]);
  });
  afterAll(async () => {
    await sshd?.stop();
    await accepting?.stop();
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
      connection: { ...conn(), port: accepting.port, hostKey: accepting.hostKey, privateKey: accepting.privateKey },
      create: 'read -r line; echo "$line/$GREETING/$(id -un)"',
      stdin: "from-stdin\n",
      environment: { GREETING: "it's me\nand a second line" },
    });
    expect(r.outs.stdout).toBe("from-stdin/it's me\nand a second line/root");
  }, 30_000);

  it("environment a server does not accept fails the step before the command runs, as upstream's", async () => {
    const marker = `/tmp/gpuhost-setenv-${process.pid}`;
    await expect(
      provider.create(urn, { connection: conn(), create: `touch ${marker}`, environment: { GREETING: "hi" } }),
    ).rejects.toThrow(
      /Unable to set 'GREETING'[\s\S]*could not set environment variable "GREETING": ssh: setenv failed/,
    );
    expect(require("node:fs").existsSync(marker)).toBe(false);
  }, 30_000);

  it("stores the connection's credentials as secrets inside the secret connection, as upstream does", async () => {
    const sig = "4dabf18193072939515e22adb298388d";
    const val = "1b47061264138c4ac30d75fd1eb44270";
    const checked = await provider.check(urn, {}, { connection: { [sig]: val, value: conn() }, create: "true" });
    const c = (checked.inputs.connection as { value: Record<string, unknown> }).value;
    expect(c.privateKey).toEqual({ [sig]: val, value: conn().privateKey });
    expect(c.host).toBe(sshd.host);
    // idempotent: an already-secret credential is not wrapped twice
    expect(withSecretCredentials(checked.inputs)).toEqual(checked.inputs);
  });

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
