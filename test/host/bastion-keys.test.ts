/**
 * The bastion's host key, checked by execOnHost (components/host/exec.ts) against TWO real OpenSSH
 * servers on loopback (test/support/sshd.ts): a bastion and a target reached through it (ssh's
 * ProxyCommand running `ssh -W` on the bastion). Each server has its own host key and its own
 * authorized client key, so a session that reaches the target used both hops' keys.
 *   - no pinned bastion key: refused by default, naming the bastion and the key it presented, and
 *     nothing runs on the target;
 *   - a pinned bastion key works (and the session really goes through the bastion);
 *   - the bastion's key swapped after pinning: refused, naming bastion.hostKey and both fingerprints;
 *   - a bad target key behind a good bastion is blamed on the target's hostKey, not the bastion.
 * Trust-on-first-use of the bastion needs the engine (the key is recorded in the state):
 * test/engine/bastion-tofu.test.ts.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { fingerprint } from "../../components/host-key/probe";
import type { SshConnection } from "../../components/host/connection";
import { execOnHost } from "../../components/host/exec";
import { freeLocalPort } from "../../ports";
import { type TestSshd, canRunSshd, startSshd } from "../support/sshd";
import { expectPlainSentences } from "../support/plain-message";

/** A file the command would create on the target: its absence proves nothing ran there. */
const marker = path.join(os.tmpdir(), `gpuhost-bastion-ran-${process.pid}`);
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");

// Like the command provider's SSH suite: a machine that cannot run sshd fails loudly unless
// GPUHOST_SKIP_TESTHOST=1 says so.
describe.skipIf(process.env.GPUHOST_SKIP_TESTHOST === "1")("execOnHost through a bastion: its host key", () => {
  let bastion: TestSshd;
  let target: TestSshd;

  beforeAll(async () => {
    if (!canRunSshd())
      throw new Error("these tests need root and /usr/sbin/sshd (set GPUHOST_SKIP_TESTHOST=1 to skip them knowingly)");
    bastion = await startSshd();
    target = await startSshd();
  });
  afterAll(async () => {
    await bastion?.stop();
    await target?.stop();
    fs.rmSync(marker, { force: true });
  });
  beforeEach(() => fs.rmSync(marker, { force: true }));

  /** The target, pinned, through the bastion with `bastionKey` pinned (or none). */
  const via = (bastionKey: string | undefined, over: { bastionPort?: number } = {}): SshConnection => ({
    kind: "ssh",
    host: target.host,
    port: target.port,
    user: "root",
    privateKey: target.privateKey,
    hostKey: target.hostKey,
    bastion: {
      host: bastion.host,
      port: over.bastionPort ?? bastion.port,
      user: "root",
      privateKey: bastion.privateKey,
      ...(bastionKey === undefined ? {} : { hostKey: bastionKey }),
    },
  });

  it("an unpinned bastion is refused by default, naming it and its key; nothing runs on the target", async () => {
    const r = await execOnHost(via(undefined), `touch ${marker}; echo ran`, []);
    expect(r.code).toBe(255);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain(
      `${bastion.host}:${bastion.port}: refused, bastion.hostKey is unset; it presented ssh-ed25519 ${fingerprint(bastion.hostKey)} ("${bastion.hostKey}")`,
    );
    expect(r.stderr).toBe(r.hostKeyRefusal);
    expectPlainSentences(r.stderr);
    // The refusal is the bastion's: the target (pinned, never reached) is not blamed.
    expect(r.stderr).not.toContain(`${target.host}:${target.port}`);
    expect(r.stderr).not.toContain(fingerprint(target.hostKey));
    expect(fs.existsSync(marker)).toBe(false);
  }, 30_000);

  it("a pinned bastion key works, and the session really goes through the bastion", async () => {
    const r = await execOnHost(via(bastion.hostKey), `touch ${marker}; echo "via-bastion $1"`, ["it's me"]);
    expect(r.stderr).toBe("");
    expect(r).toMatchObject({ code: 0, stdout: "via-bastion it's me\n" });
    expect(fs.existsSync(marker)).toBe(true);
    // The same target with the bastion's port closed fails: the route is the bastion, not a direct one.
    fs.rmSync(marker, { force: true });
    const closed = await execOnHost(
      via(bastion.hostKey, { bastionPort: await freeLocalPort() }),
      `touch ${marker}`,
      [],
    );
    expect(closed.code).toBe(255);
    expect(closed.stderr).toMatch(/Connection refused|Connection closed/);
    expect(fs.existsSync(marker)).toBe(false);
  }, 30_000);

  it("a bad target key behind a good bastion is blamed on hostKey, not bastion.hostKey", async () => {
    const wrong = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHn4bVX1nZt0G5u9i4S2o9pC1VjV1t2pA0v6tO3nB7hM";
    const r = await execOnHost({ ...via(bastion.hostKey), hostKey: wrong }, `touch ${marker}`, []);
    expect(r.code).toBe(255);
    expect(r.stderr).toContain(
      `${target.host}:${target.port} presented ssh-ed25519 ${fingerprint(target.hostKey)}, but hostKey pins ssh-ed25519 ${fingerprint(wrong)}: refused`,
    );
    expectPlainSentences(r.stderr);
    expect(r.stderr).not.toContain("bastion.hostKey");
    expect(fs.existsSync(marker)).toBe(false);
  }, 30_000);

  // Last: it replaces the bastion's host key.
  it("the bastion's key swapped after pinning is refused, naming bastion.hostKey and both fingerprints", async () => {
    const pinned = bastion.hostKey;
    expect((await execOnHost(via(pinned), "echo before", [])).stdout).toBe("before\n");
    await bastion.swapHostKey();
    expect(bastion.hostKey).not.toBe(pinned);
    const r = await execOnHost(via(pinned), `touch ${marker}; echo ran`, []);
    expect(r.code).toBe(255);
    expect(r.stdout).toBe("");
    // The refusal alone, in plain sentences: OpenSSH's banner ("REMOTE HOST IDENTIFICATION HAS
    // CHANGED", "remove with: ssh-keygen -R" for gpuhost's temporary known_hosts) is not passed on.
    expect(r.stderr).toBe(r.hostKeyRefusal);
    expectPlainSentences(r.stderr);
    expect(r.stderr).toMatch(
      new RegExp(
        `^${escape(`${bastion.host}:${bastion.port}`)} presented ssh-ed25519 ${escape(fingerprint(bastion.hostKey))}, but bastion\\.hostKey pins ssh-ed25519 ${escape(fingerprint(pinned))}: refused`,
      ),
    );
    expect(fs.existsSync(marker)).toBe(false);
    // Pinning the new key (after checking it) lets the same session through again.
    expect((await execOnHost(via(bastion.hostKey), "echo after", [])).stdout).toBe("after\n");
  }, 30_000);
});
