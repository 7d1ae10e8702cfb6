/**
 * The bastion's host-key policies under the real engine, with two real OpenSSH servers on loopback
 * (a bastion and a target behind it, test/support/sshd.ts) and the fixture program
 * test/engine/fixture/bastion-program.ts, which fills in the keys as index.ts does (trustConnection)
 * and, on every up, reaches the target through the bastion twice: a remote.Command (the command
 * provider's proxy hop) and a dynamic resource running execOnHost (the providers' path).
 *   - pinned (the default) without bastion.hostKey: preview refuses, naming the bastion's key;
 *   - trust-on-first-use, as the target's is tested on the test host (security.test.ts): the first
 *     up records the bastion's key in the state (TrustedHostKey) and says so; later ups enforce it;
 *     the bastion's key swapped is refused by the program before any step (so neither path is given
 *     a connection), in plain sentences naming both fingerprints, when and by which resource the
 *     first was recorded, and the `pulumi up --replace` that accepts a new one; the record keeps the
 *     first key. (The paths' own refusals of a key other than the one they are given:
 *     test/host/bastion-keys.test.ts, test/engine/command-provider-ssh.test.ts.)
 * The fixture runs from dist/: build first (npm test does).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fingerprint } from "../../components/host-key/probe";
import { PROJECT_ROOT, ensureStack, runPulumi } from "../../engine/pulumi";
import { type StateExport, testEngineOptions, writeFixtureProject } from "../support/engine";
import { errorLines, expectPlainSentences } from "../support/plain-message";
import { type TestSshd, canRunSshd, startSshd } from "../support/sshd";

const STACK = "bastion";
const STEP = 300_000;
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");

interface Outputs {
  commandOutput: string;
  execOutput: string;
  bastionKeyChecked: string;
}

describe.skipIf(process.env.GPUHOST_SKIP_TESTHOST === "1")("the bastion's host-key policies under the engine", () => {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-bastion-tofu-"));
  const opts = testEngineOptions(work, STEP);
  let bastion: TestSshd;
  let target: TestSshd;
  const pulumi = (...args: string[]) => runPulumi([...args, "--stack", STACK], opts);
  const ok = async (...args: string[]) => {
    const r = await pulumi(...args);
    if (r.code !== 0) throw new Error(`pulumi ${args.join(" ")} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
    return r;
  };
  const outputs = async () => JSON.parse((await ok("stack", "output", "--json", "--show-secrets")).stdout) as Outputs;
  /** The TrustedHostKey record in the state. */
  const record = async () => {
    const state = JSON.parse((await ok("stack", "export", "--show-secrets")).stdout) as StateExport;
    return state.deployment.resources.find((r) => r.urn.endsWith("::hop-trusted-host-key"))?.outputs;
  };

  beforeAll(async () => {
    if (!canRunSshd())
      throw new Error("these tests need root and /usr/sbin/sshd (set GPUHOST_SKIP_TESTHOST=1 to skip them knowingly)");
    writeFixtureProject(
      work,
      "gpuhost-bastion",
      path.join(PROJECT_ROOT, "dist", "test", "engine", "fixture", "bastion-program.js"),
    );
    bastion = await startSshd();
    target = await startSshd();
    await ensureStack(STACK, opts);
    for (const [k, v] of [
      ["targetHost", target.host],
      ["targetPort", String(target.port)],
      ["targetHostKey", target.hostKey],
      ["bastionHost", bastion.host],
      ["bastionPort", String(bastion.port)],
      ["bastionPolicy", "pinned"],
      ["run", "0"],
    ])
      await ok("config", "set", k, v);
    await ok(
      "config",
      "set-all",
      "--secret",
      `targetKey=${target.privateKey}`,
      "--secret",
      `bastionKey=${bastion.privateKey}`,
    );
  }, STEP);

  afterAll(async () => {
    await pulumi("destroy", "--yes", "--skip-preview").catch(() => undefined);
    await bastion?.stop();
    await target?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }, STEP);

  it(
    "pinned (the default) without bastion.hostKey: preview refuses, naming the bastion's key",
    async () => {
      const r = await pulumi("preview");
      expect(r.code).not.toBe(0);
      const out = r.stdout + r.stderr;
      expect(out).toContain("fixture.connection.bastion.hostKey is unset and hostKeyPolicy is pinned");
      expect(out).toContain(fingerprint(bastion.hostKey));
      expect(out).toContain(`fixture.connection.bastion.hostKey = "${bastion.hostKey}"`);
    },
    STEP,
  );

  it(
    "trust-on-first-use: the first up records the bastion's key and says so; the next up enforces it",
    async () => {
      await ok("config", "set", "bastionPolicy", "trust-on-first-use");
      await ok("config", "set", "run", "1");
      const first = await pulumi("up", "--yes", "--skip-preview");
      expect(first.code, first.stdout + first.stderr).toBe(0);
      expect(first.stdout + first.stderr).toMatch(
        new RegExp(
          `trusting the bastion ${escape(bastion.host)}:${bastion.port}'s host key ${escape(fingerprint(bastion.hostKey))}, recorded on first use`,
        ),
      );
      expect(await outputs()).toEqual({
        commandOutput: "command reached the target: 1",
        execOutput: "exec reached the target: 1",
        bastionKeyChecked: bastion.hostKey,
      });
      const recorded = await record();
      expect(recorded?.bastionHostKey).toBe(bastion.hostKey);
      expect(recorded?.hostKey).toBe(target.hostKey);

      // Later ups check against the record, which stays as it was.
      await ok("config", "set", "run", "2");
      const second = await pulumi("up", "--yes", "--skip-preview");
      expect(second.code, second.stdout + second.stderr).toBe(0);
      expect((await outputs()).execOutput).toBe("exec reached the target: 2");
      expect((await outputs()).commandOutput).toBe("command reached the target: 2");
      expect((await record())?.recordedAt).toBe(recorded?.recordedAt);
    },
    STEP,
  );

  // Last: it swaps the bastion's host key.
  it(
    "trust-on-first-use: the bastion's key swapped is refused before any step, naming both fingerprints and the record",
    async () => {
      const first = bastion.hostKey;
      await bastion.swapHostKey();
      await ok("config", "set", "run", "3");
      const up = await pulumi("up", "--yes", "--skip-preview", "--continue-on-error");
      expect(up.code).not.toBe(0);
      const out = up.stdout + up.stderr;
      const recorded = await record();
      const urn = `urn:pulumi:${STACK}::gpuhost-bastion::pulumi-nodejs:dynamic:Resource::hop-trusted-host-key`;
      // The program compares the key presented with the record before any step gets the connection:
      // one refusal that says the key was recorded on first use, and how to accept a new one.
      const lines = [...new Set(errorLines(out))];
      expect(lines, out).toEqual([
        `fixture.connection.bastion: the bastion ${bastion.host}:${bastion.port} presented ssh-ed25519 ${fingerprint(bastion.hostKey)}, but the key trust-on-first-use recorded for it at ${String(recorded?.recordedAt)} (resource hop-trusted-host-key) is ssh-ed25519 ${fingerprint(first)}: refused, nothing was run on it. ` +
          `If the host's key really changed (check it on the host: ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub), accept the new one with: pulumi up --replace '${urn}'`,
      ]);
      expectPlainSentences(lines[0]);
      expect(out).not.toContain("pins");
      expect(out).not.toContain("reached the target: 3");
      // The record is not rewritten by a refused run: the first key stays the trusted one.
      expect((await record())?.bastionHostKey).toBe(first);
    },
    STEP,
  );
});
