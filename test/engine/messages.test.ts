/**
 * What a person reads when gpuhost refuses, under the real engine and the real program (dist/index.js):
 * one line of one or two plain sentences (test/support/plain-message.ts), never a stack trace, colour
 * codes, the SDK's "unhandled exception" or "error serializing property" wrapping, or OpenSSH's banner.
 *   - a bad stack config (a port of 70000, an unknown key, a CUDA release the catalogue lacks, a
 *     100 kB served model name): the config path and what is wrong;
 *   - an SSH host without a pinned key (a real OpenSSH server on loopback, test/support/sshd.ts): the
 *     key and fingerprint it presented, and the command that pins it;
 *   - trust-on-first-use, the host's key swapped after it was recorded: both fingerprints, when the key
 *     was recorded and by which resource, and the `pulumi up --replace` that accepts a new one.
 * Nothing is provisioned on the SSH host: the TOFU record is made with `up --target` (only that
 * resource), and every other run is refused before any step.
 * The program runs from dist/: build first (npm test does).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toolkitReleases } from "../../components/cuda-catalog/catalog";
import { fingerprint } from "../../components/host-key/probe";
import { type StateExport } from "../support/engine";
import { errorLines, expectPlainSentences } from "../support/plain-message";
import { type TestSshd, canRunSshd, startSshd } from "../support/sshd";
import { type TestStack, createTestStack } from "../support/stack";

const STEP = 300_000;

/** The error lines of a failed run, each checked for its shape. */
function refusalsOf(r: { code: number; stdout: string; stderr: string }): string[] {
  const out = r.stdout + r.stderr;
  expect(r.code, out).not.toBe(0);
  expect(out).not.toContain("\u001b[");
  expect(out).not.toMatch(/^\s+at /m);
  const lines = [...new Set(errorLines(out))];
  expect(lines.length, out).toBeGreaterThan(0);
  for (const line of lines) expectPlainSentences(line);
  return lines;
}

/** The one error line of a failed run, checked for its shape. */
function refusalOf(r: { code: number; stdout: string; stderr: string }): string {
  const lines = refusalsOf(r);
  expect(lines, r.stdout + r.stderr).toHaveLength(1);
  return lines[0];
}

describe("a bad stack config under the engine", () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await createTestStack("sim", [], STEP);
  }, STEP);
  afterAll(async () => {
    await stack?.dispose();
  }, STEP);

  it(
    "a port of 70000: preview prints one plain sentence with the config path",
    async () => {
      await stack.ok("config", "set", "--path", "gpuhost:services.port", "70000");
      const line = refusalOf(await stack.run("preview"));
      expect(line).toBe(
        "Invalid gpuhost stack configuration: gpuhost:services.port: Too big: expected number to be <=65535. Fix it with `pulumi config set --path <path> <value>` (or `pulumi config rm --path <path>`), or in the stack's Pulumi.<stack>.yaml.",
      );
      await stack.ok("config", "set", "--path", "gpuhost:services.port", "30000");
    },
    STEP,
  );

  it(
    "a CUDA release the catalogue lacks (99.9): one plain sentence naming gpuhost:toolkit.release and what it holds",
    async () => {
      // Before, the schema let it through and the toolkit's plan threw: a stack trace in colour.
      await stack.ok("config", "set", "--path", "gpuhost:toolkit.release", "99.9");
      expect(refusalOf(await stack.run("preview"))).toBe(
        `Invalid gpuhost stack configuration: gpuhost:toolkit.release: 99.9 is not a CUDA release of components/cuda-catalog/cuda.yaml (it holds: ${toolkitReleases().join(", ")}). Fix it with \`pulumi config set --path <path> <value>\` (or \`pulumi config rm --path <path>\`), or in the stack's Pulumi.<stack>.yaml.`,
      );
      await stack.ok("config", "rm", "--path", "gpuhost:toolkit.release");
    },
    STEP,
  );

  it(
    "a 100 kB servedModelName: refused at preview naming its path, not by the kernel at up (spawn E2BIG)",
    async () => {
      await stack.ok("config", "set", "--path", "gpuhost:services.servedModelName", "m".repeat(100_000));
      expect(refusalOf(await stack.run("preview"))).toMatch(
        /^Invalid gpuhost stack configuration: gpuhost:services\.servedModelName: must be 1-256 characters of /,
      );
      await stack.ok("config", "rm", "--path", "gpuhost:services.servedModelName");
    },
    STEP,
  );

  it(
    "an unknown key, top-level or nested: named at its own path",
    async () => {
      await stack.ok("config", "set", "--path", "gpuhost:services.prot", "1");
      expect(refusalOf(await stack.run("preview"))).toMatch(
        /^Invalid gpuhost stack configuration: gpuhost:services\.prot: unknown key\. Fix it with /,
      );
      await stack.ok("config", "rm", "--path", "gpuhost:services.prot");
      await stack.ok("config", "set", "gpuhost:servics", "1");
      expect(refusalOf(await stack.run("preview"))).toMatch(
        /^Invalid gpuhost stack configuration: gpuhost:servics: unknown key \(known: hosts, [A-Za-z, ]+\)\. Fix it with /,
      );
      await stack.ok("config", "rm", "gpuhost:servics");
    },
    STEP,
  );
});

describe.skipIf(process.env.GPUHOST_SKIP_TESTHOST === "1")("an SSH host's key under the engine", () => {
  let stack: TestStack;
  let sshd: TestSshd;
  const where = () => `${sshd.host}:${sshd.port}`;
  const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");

  beforeAll(async () => {
    if (!canRunSshd())
      throw new Error("these tests need root and /usr/sbin/sshd (set GPUHOST_SKIP_TESTHOST=1 to skip them knowingly)");
    sshd = await startSshd();
    stack = await createTestStack("sim", [], STEP);
    for (const [p, v] of [
      ["kind", "ssh"],
      ["host", sshd.host],
      ["port", String(sshd.port)],
      ["user", "root"],
    ])
      await stack.ok("config", "set", "--path", `gpuhost:hosts[0].connection.${p}`, v);
    await stack.ok("config", "set-all", "--secret", `sshPrivateKey=${sshd.privateKey}`);
  }, STEP);
  afterAll(async () => {
    await stack?.dispose();
    await sshd?.stop();
  }, STEP);

  it(
    "over SSH from a remote package index without a hash lock: one plain sentence naming the config key",
    async () => {
      // (The host's key, probed at the same time, is refused beside it: see the next test.)
      expect(refusalsOf(await stack.run("preview"))).toContainEqual(
        expect.stringMatching(
          /^gpuhost:environment\.requirementsLock is required: packages come from a remote index .*\(pip-compile --generate-hashes\)$/,
        ),
      );
      // A file index needs no lock: the host's key is all that is refused next.
      await stack.ok("config", "set", "--path", "gpuhost:environment.pipIndexUrl", "file:///srv/gpuhost-pypi/simple/");
    },
    STEP,
  );

  it(
    "unpinned: preview and up refuse in two sentences naming the key it presented and how to pin it",
    async () => {
      const line = refusalOf(await stack.run("preview"));
      // up too: before, its refusal was the tail of "error serializing property serviceIdentity: ...".
      expect(refusalOf(await stack.run("up", "--yes", "--skip-preview"))).toBe(line);
      expect(line).toBe(
        `gpuhost:hosts[0].connection.hostKey is unset and hostKeyPolicy is pinned: refusing to run anything on ${where()}, which cannot be told from an impostor. ` +
          `It presented ssh-ed25519 ${fingerprint(sshd.hostKey)}; if that is your host's key (check it on the host: ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub), pin it: gpuhost:hosts[0].connection.hostKey = "${sshd.hostKey}" (pulumi config set --path 'gpuhost:hosts[0].connection.hostKey' '${sshd.hostKey}'), or choose hostKeyPolicy trust-on-first-use.`,
      );
    },
    STEP,
  );

  it(
    "trust-on-first-use, the key swapped: refused naming both keys, when and by which resource the first was recorded, and the command that accepts the new one",
    async () => {
      await stack.ok("config", "set", "--path", "gpuhost:hosts[0].connection.hostKeyPolicy", "trust-on-first-use");
      // Record the key, creating only the record: nothing is provisioned on this machine's sshd. (The
      // refused up before left the stack's root resource, and --target then names only resources that
      // exist: empty the state first, as on a first run.)
      await stack.ok("destroy", "--yes", "--skip-preview");
      const state = async () =>
        (JSON.parse((await stack.ok("stack", "export")).stdout) as StateExport).deployment.resources;
      const urn = `urn:pulumi:${stack.stack}::gpuhost::pulumi-nodejs:dynamic:Resource::sim-1-trusted-host-key`;
      const first = await stack.run("up", "--yes", "--skip-preview", "--target", urn);
      expect(first.code, first.stdout + first.stderr).toBe(0);
      const record = (await state()).find((r) => r.urn === urn);
      expect(record?.outputs?.hostKey).toBe(sshd.hostKey);
      const recordedAt = String(record?.outputs?.recordedAt);

      const recorded = sshd.hostKey;
      await sshd.swapHostKey();
      const expected =
        `gpuhost:hosts[0].connection: ${where()} presented ssh-ed25519 ${fingerprint(sshd.hostKey)}, but the key trust-on-first-use recorded for it at ${recordedAt} (resource sim-1-trusted-host-key) is ssh-ed25519 ${fingerprint(recorded)}: refused, nothing was run on it. ` +
        `If the host's key really changed (check it on the host: ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub), accept the new one with: pulumi up --replace '${urn}'`;
      expect(refusalOf(await stack.run("preview"))).toBe(expected);
      const up = await stack.run("up", "--yes", "--skip-preview", "--target", urn);
      expect(refusalOf(up)).toBe(expected);
      expect(up.stdout + up.stderr).not.toMatch(new RegExp(`hostKey pins|${escape("ssh-keygen -R")}`));
      // The record is kept: a refused run rewrites nothing.
      expect((await state()).find((r) => r.urn === urn)?.outputs?.hostKey).toBe(recorded);

      // The command the refusal names accepts the new key (only the record is replaced here).
      const replaced = await stack.run("up", "--yes", "--skip-preview", "--target", urn, "--replace", urn);
      expect(replaced.code, replaced.stdout + replaced.stderr).toBe(0);
      expect((await state()).find((r) => r.urn === urn)?.outputs?.hostKey).toBe(sshd.hostKey);
    },
    STEP,
  );
});
