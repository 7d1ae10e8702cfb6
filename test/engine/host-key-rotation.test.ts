/**
 * A pinned host key that changes, under the real engine with a real OpenSSH server (test/support/
 * sshd.ts) whose key is swapped, and the fixture test/engine/fixture/rekey-program.ts: a ToolkitState
 * (whose read probes the host over SSH on every refresh) with the key pinned. The project's
 * `refresh: always` is set as in Pulumi.yaml, so every `pulumi up` refreshes first.
 *
 * Refresh reads with the connection stored in the state, which pins the old key. Before, that read
 * failed and so did every `pulumi up` after the user pinned the new key, until one
 * `pulumi up --refresh=false`. Now a read refused on the host key keeps the stored state, marked
 * (hostKeyRefused), and the update that follows runs with the current inputs:
 *   - the key swapped and NOT re-pinned: `up` still fails, naming both fingerprints (the update reads
 *     with the same old pin), and `gpuhost drift`'s report calls the host an error;
 *   - the new key pinned: the next plain `up` succeeds, re-probes with the new key, and stores it;
 *     the up after it reads with the new key.
 * The fixture runs from dist/: build first (npm test does).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exitCodeOf, parseRefreshOutput } from "../../components/drift/report";
import { fingerprint } from "../../components/host-key/probe";
import { PROJECT_ROOT, ensureStack, runPulumi } from "../../engine/pulumi";
import { type StateExport, testEngineOptions, writeFixtureProject } from "../support/engine";
import { errorLines, expectPlainSentences } from "../support/plain-message";
import { type TestSshd, canRunSshd, startSshd } from "../support/sshd";

const STACK = "rekey";
const STEP = 300_000;

describe.skipIf(process.env.GPUHOST_SKIP_TESTHOST === "1")("a pinned host key that changed, under the engine", () => {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-rekey-"));
  const opts = testEngineOptions(work, STEP);
  let sshd: TestSshd;
  const pulumi = (...args: string[]) => runPulumi([...args, "--stack", STACK], opts);
  const ok = async (...args: string[]) => {
    const r = await pulumi(...args);
    if (r.code !== 0) throw new Error(`pulumi ${args.join(" ")} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
    return r;
  };
  /** The ToolkitState's stored outputs. */
  const stored = async () => {
    const state = JSON.parse((await ok("stack", "export", "--show-secrets")).stdout) as StateExport;
    return state.deployment.resources.find((r) => r.urn.endsWith("::rekey-toolkit-state"))?.outputs ?? {};
  };
  /** A secret in `stack export --show-secrets`: { <secret signature>: ..., plaintext: "<JSON>" }. */
  const reveal = (v: unknown): unknown =>
    typeof v === "object" && v !== null && typeof (v as { plaintext?: unknown }).plaintext === "string"
      ? (JSON.parse((v as { plaintext: string }).plaintext) as unknown)
      : v;
  const storedHostKey = async () => (reveal((await stored()).connection) as { hostKey?: string } | undefined)?.hostKey;

  beforeAll(async () => {
    if (!canRunSshd())
      throw new Error("these tests need root and /usr/sbin/sshd (set GPUHOST_SKIP_TESTHOST=1 to skip them knowingly)");
    writeFixtureProject(
      work,
      "gpuhost-rekey",
      path.join(PROJECT_ROOT, "dist", "test", "engine", "fixture", "rekey-program.js"),
    );
    // As the project's Pulumi.yaml: every up refreshes first.
    fs.appendFileSync(path.join(work, "Pulumi.yaml"), "options:\n  refresh: always\n");
    sshd = await startSshd();
    await ensureStack(STACK, opts);
    await ok("config", "set", "host", sshd.host);
    await ok("config", "set", "port", String(sshd.port));
    await ok("config", "set", "hostKey", sshd.hostKey);
    await ok("config", "set-all", "--secret", `privateKey=${sshd.privateKey}`);
    await ok("up", "--yes", "--skip-preview");
  }, STEP);

  afterAll(async () => {
    await pulumi("destroy", "--yes", "--skip-preview").catch(() => undefined);
    await sshd?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }, STEP);

  it(
    "the key swapped and not re-pinned: up fails naming both fingerprints; gpuhost drift reports an error",
    async () => {
      const first = sshd.hostKey;
      expect(await storedHostKey()).toBe(first);
      await sshd.swapHostKey();
      const up = await pulumi("up", "--yes", "--skip-preview");
      expect(up.code).not.toBe(0);
      const out = up.stdout + up.stderr;
      expect(out).toContain(
        `${sshd.host}:${sshd.port} presented ssh-ed25519 ${fingerprint(sshd.hostKey)}, but hostKey pins ssh-ed25519 ${fingerprint(first)}: refused`,
      );
      // Plain sentences, not OpenSSH's banner (whose tail, "...move with: ssh-keygen -R ...", began the
      // probe's error line when it kept stderr's last 500 characters).
      for (const line of new Set(errorLines(out))) expectPlainSentences(line);
      expect(out).not.toMatch(/move with:|@@@|REMOTE HOST IDENTIFICATION|Host key verification failed/);
      expect(await storedHostKey()).toBe(first);

      // What `gpuhost drift` runs and reads: the host was not checked (exit 10), with the refusal.
      const refresh = await runPulumi(
        ["refresh", "--preview-only", "--expect-no-changes", "--json", "--stack", STACK],
        {
          ...opts,
          env: { ...opts.env, PULUMI_ENABLE_STREAMING_JSON_PREVIEW: "true", PULUMI_SKIP_CONFIRMATIONS: "false" },
        },
      );
      const report = parseRefreshOutput(refresh.stdout, STACK);
      expect(exitCodeOf(report), refresh.stdout + refresh.stderr).toBe(10);
      expect(report.hosts.map((h) => h.status)).toEqual(["error"]);
      expect(report.hosts[0]?.errors.join("\n")).toContain(`but hostKey pins ssh-ed25519 ${fingerprint(first)}`);
    },
    STEP,
  );

  it(
    "the new key pinned: the next plain up (refresh included) succeeds with it; the one after reads with it",
    async () => {
      await ok("config", "set", "hostKey", sshd.hostKey);
      const up = await pulumi("up", "--yes", "--skip-preview");
      expect(up.code, up.stdout + up.stderr).toBe(0);
      const outs = await stored();
      expect((reveal(outs.connection) as { hostKey?: string }).hostKey).toBe(sshd.hostKey);
      expect(outs.hostKeyRefused).toBeUndefined();
      expect(outs.hostLabel).toBe(`ssh root@${sshd.host}:${sshd.port}`);
      expect(up.stdout + up.stderr).toContain("not probed"); // the refresh said why it kept the record
      // The next up's refresh probes with the stored (new) key. (ToolkitState still updates on every up
      // here: the probed machine is no CUDA host, so its drift never clears; onDrift "record" keeps it.)
      const again = await pulumi("up", "--yes", "--skip-preview");
      expect(again.code, again.stdout + again.stderr).toBe(0);
      expect(again.stdout + again.stderr).not.toContain("not probed");
      expect((await stored()).hostKeyRefused).toBeUndefined();
    },
    STEP,
  );
});
