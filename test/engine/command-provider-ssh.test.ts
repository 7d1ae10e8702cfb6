/**
 * Remote commands through a real OpenSSH server on loopback: host key checking (unpinned refused,
 * a swapped key refused), stdin, environment (as upstream: SSH environment requests, refused by a
 * server without AcceptEnv), dial retries, keepalives against a half-open session, the step timeout.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { fingerprint } from "../../components/host-key/probe";
import { renderInvocation } from "../../components/host/invocation";
import { REMOTE, provider, withSecretCredentials } from "../../engine/offline-plugins/command-provider/provider";
import { killAll, leftBehind } from "../support/processes";
import { TestSshd, canRunSshd, startSshd } from "../support/sshd";
import { startStallProxy } from "../support/stall-proxy";

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
    expect(fs.existsSync(marker)).toBe(false);
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

  afterEach(() => {
    delete process.env.GPUHOST_SSH_KEEPALIVE_S;
    delete process.env.GPUHOST_COMMAND_TIMEOUT_S;
  });

  it("refuses a host without a pinned key, runs nothing on it, and shows the key it presented", async () => {
    const marker = `/tmp/gpuhost-unpinned-${process.pid}`;
    const { hostKey: _unset, ...unpinned } = conn();
    const err = await provider.create(urn, { connection: unpinned, create: `touch ${marker}` }).catch((e: Error) => e);
    expect(err).toBeInstanceOf(Error);
    const msg = (err as Error).message;
    expect(msg).toContain("connection.hostKey is unset");
    expect(msg).toContain(fingerprint(sshd.hostKey));
    expect(msg).toContain(`connection.hostKey = "${sshd.hostKey}"`);
    expect(fs.existsSync(marker)).toBe(false);
  }, 30_000);

  it("refuses an unpinned jump host, naming connection.proxy.hostKey", async () => {
    const { hostKey: _unset, ...bastion } = conn();
    const viaProxy = { ...conn(), proxy: bastion };
    const msg = await provider
      .create(urn, { connection: viaProxy, create: "true" })
      .then(() => "ran")
      .catch((e: Error) => e.message);
    expect(msg).toContain("connection.proxy.hostKey is unset");
    expect(msg).toContain(fingerprint(sshd.hostKey));
    // Pinned on both hops, the same path works.
    const ok = await provider.create(urn, { connection: { ...conn(), proxy: conn() }, create: "echo via-jump" });
    expect(ok.outs.stdout).toBe("via-jump");
  }, 30_000);

  it("refuses the host once its key was swapped between two runs, naming both fingerprints", async () => {
    const before = conn();
    expect((await provider.create(urn, { connection: before, create: "echo first" })).outs.stdout).toBe("first");
    const old = sshd.hostKey;
    await sshd.swapHostKey();
    const msg = await provider
      .create(urn, { connection: before, create: "echo second" })
      .then(() => "ran")
      .catch((e: Error) => e.message);
    expect(msg).toContain(`presented ssh-ed25519 ${fingerprint(sshd.hostKey)}`);
    expect(msg).toContain(`pins ssh-ed25519 ${fingerprint(old)}`);
  }, 30_000);

  it("fails a half-open session in bounded time with a clear error (keepalives)", async () => {
    process.env.GPUHOST_SSH_KEEPALIVE_S = "1";
    const proxy = await startStallProxy(sshd.port);
    try {
      const started = Date.now();
      const run = provider.create(urn, {
        connection: { ...conn(), port: proxy.port },
        create: "echo started; sleep 60",
      });
      await new Promise((r) => setTimeout(r, 2000));
      proxy.stall();
      const msg = await run.then(() => "finished").catch((e: Error) => e.message);
      expect(msg).toMatch(/SSH session stopped answering \(4 keepalives 1 s apart went unanswered\)/);
      expect(Date.now() - started).toBeLessThan(15_000);
    } finally {
      await proxy.close();
    }
  }, 30_000);

  it("stops a command that runs past the step timeout", async () => {
    process.env.GPUHOST_COMMAND_TIMEOUT_S = "2";
    const started = Date.now();
    const msg = await provider
      .create(urn, { connection: conn(), create: "sleep 60" })
      .then(() => "finished")
      .catch((e: Error) => e.message);
    expect(msg).toContain("ran past the step timeout of 2 s");
    expect(Date.now() - started).toBeLessThan(10_000);
  }, 30_000);

  it("a command line gpuhost renders, its client stopped, stops on the host too (sshd sends no SIGHUP without a PTY)", async () => {
    // The step timeout must outlast the SSH handshake and the command's start on a loaded machine
    // (2 s did not: the pid file was not there yet); the sleep outlasts it by far either way.
    process.env.GPUHOST_COMMAND_TIMEOUT_S = "10";
    const pidFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-cmd-test-")), "sleep.pid");
    // The provider runs the command as it is, as upstream's does; the watch of the SSH session is in
    // the command line gpuhost renders for an SSH host (components/host/remote-session.ts).
    const create = renderInvocation({
      scriptText: `sleep 60 & echo $! >${pidFile}; wait`,
      scriptName: "t.sh",
      args: [],
      overSsh: true,
    });
    const msg = await provider
      .create(urn, { connection: conn(), create })
      .then(() => "finished")
      .catch((e: Error) => e.message);
    expect(msg).toContain("ran past the step timeout");
    const pid = Number(fs.readFileSync(pidFile, "utf8"));
    expect(await leftBehind(new Map([[pid, "sleep 60"]]), 10)).toEqual([]);
    fs.rmSync(path.dirname(pidFile), { recursive: true, force: true });
  }, 60_000);

  it("a command line gpuhost renders, its network stalled (no FIN, no RST), stops on the host within the keepalives' bound", async () => {
    // Keepalives 1 s apart, 4 unanswered: the client gives up after about 4 s, and the watch ends the
    // command once the session's connection has been silent that long. sshd itself would notice
    // nothing for hours (its TCP keepalive), so without the watch's bound the sleep runs its 300 s.
    process.env.GPUHOST_SSH_KEEPALIVE_S = "1";
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-cmd-stall-"));
    const pidFile = path.join(dir, "sleep.pid");
    const create = renderInvocation({
      scriptText: `sleep 300 & echo $! >${pidFile}; wait`,
      scriptName: "t.sh",
      args: [],
      overSsh: true,
    });
    const proxy = await startStallProxy(sshd.port);
    let pid = 0;
    try {
      const run = provider.create(urn, { connection: { ...conn(), port: proxy.port }, create });
      const deadline = Date.now() + 20_000;
      while (!fs.existsSync(pidFile) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      pid = Number(fs.readFileSync(pidFile, "utf8"));
      proxy.stall();
      const stalled = Date.now();
      const msg = await run.then(() => "finished").catch((e: Error) => e.message);
      expect(msg).toMatch(/SSH session stopped answering/);
      expect(await leftBehind(new Map([[pid, "sleep 300"]]), 25)).toEqual([]);
      const seconds = (Date.now() - stalled) / 1000;
      console.log(`[ssh stall] the remote command was gone ${seconds.toFixed(1)} s after the network stalled`);
      expect(seconds).toBeLessThan(25);
    } finally {
      if (pid > 0) killAll([pid]);
      await proxy.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it("a command line gpuhost renders, silent for twice that bound on a healthy network, runs to its end (the keepalives keep it)", async () => {
    process.env.GPUHOST_SSH_KEEPALIVE_S = "1";
    const create = renderInvocation({ scriptText: "sleep 9; echo done", scriptName: "t.sh", args: [], overSsh: true });
    const r = await provider.create(urn, { connection: conn(), create });
    expect(r.outs.stdout).toBe("done");
  }, 60_000);

  it("refuses a host whose key does not match", async () => {
    const wrong = {
      ...conn(),
      hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHn4bVX1nZt0G5u9i4S2o9pC1VjV1t2pA0v6tO3nB7hM",
    };
    await expect(provider.create(urn, { connection: wrong, create: "true" })).rejects.toThrow(
      /refused, the host presented ssh-ed25519 SHA256:.* but connection.hostKey pins/,
    );
  }, 30_000);

  it("gives up after dialErrorLimit attempts on a closed port", async () => {
    const closed = { ...conn(), port: 1, dialErrorLimit: 2 };
    await expect(provider.create(urn, { connection: closed, create: "true" })).rejects.toThrow(/dial failed 2 times/);
  }, 30_000);
});
