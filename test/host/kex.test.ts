/**
 * The suite's SSH servers offer X25519 alone (TEST_SSHD_KEX in test/support/sshd.ts: OpenSSH's
 * post-quantum exchange costs its client 87 ms of CPU a connection, and gpuhost opens one a script).
 * Here, against two real OpenSSH servers: gpuhost's own SSH (execOnHost) works with a stock server,
 * which offers OpenSSH's defaults, and the OpenSSH client it runs negotiates the post-quantum
 * exchange there and X25519 with the suite's servers: what the restriction changes, and no more.
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SshConnection } from "../../components/host/connection";
import { execOnHost } from "../../components/host/exec";
import { type TestSshd, canRunSshd, startSshd } from "../support/sshd";

describe.skipIf(process.env.GPUHOST_SKIP_TESTHOST === "1")("the key exchange of the suite's SSH servers", () => {
  let stock: TestSshd;
  let suite: TestSshd;
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-kex-"));

  beforeAll(async () => {
    if (!canRunSshd())
      throw new Error("these tests need root and /usr/sbin/sshd (set GPUHOST_SKIP_TESTHOST=1 to skip them knowingly)");
    stock = await startSshd([], true);
    suite = await startSshd();
  });
  afterAll(async () => {
    await stock?.stop();
    await suite?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  });

  const pinned = (s: TestSshd): SshConnection => ({
    kind: "ssh",
    host: s.host,
    port: s.port,
    user: "root",
    privateKey: s.privateKey,
    hostKey: s.hostKey,
  });

  /** The exchange the OpenSSH client agrees on with S (from its verbose log). */
  const negotiated = (s: TestSshd): string => {
    const known = path.join(work, `known-${s.port}`);
    fs.writeFileSync(known, `[${s.host}]:${s.port} ${s.hostKey}\n`);
    const r = spawnSync(
      "ssh",
      [
        "-v",
        ...["-o", "BatchMode=yes", "-o", `UserKnownHostsFile=${known}`, "-o", "StrictHostKeyChecking=yes"],
        ...["-i", s.privateKeyPath, "-p", String(s.port), `root@${s.host}`, "true"],
      ],
      { encoding: "utf8", timeout: 30_000 },
    );
    expect(r.status, r.stderr).toBe(0);
    return /kex: algorithm: (\S+)/.exec(r.stderr)?.[1] ?? "(none)";
  };

  it("gpuhost's SSH runs its script on a stock server, with OpenSSH's default exchange", async () => {
    const r = await execOnHost(pinned(stock), 'echo "stock $1"', ["server"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe("stock server\n");
    expect(negotiated(stock)).toMatch(/^(sntrup761|mlkem768)x25519/);
  }, 60_000);

  it("the suite's servers settle on X25519: the only difference", async () => {
    const r = await execOnHost(pinned(suite), 'echo "suite $1"', ["server"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe("suite server\n");
    expect(negotiated(suite)).toBe("curve25519-sha256");
  }, 60_000);
});
