/**
 * Security on a real Debian host (issue #12), with the real program under the real engine:
 *   - the API key is in no process's argv (/proc/PID/cmdline of the service and every child), the
 *     gate authenticates with it, and a wrong key gets 401;
 *   - rotation: `pulumi config set --secret apiKey NEW` + `pulumi up` reaches the host, the old key
 *     stops working and the new one works;
 *   - the key file changed or deleted on the host and the unit restarted (issue 19.2): `gpuhost drift`
 *     names the service's key, and the next up repairs in order: file, restart, gate.
 * The host key is pinned (testhost-stack.ts), and the package sources are file:// on the host.
 */
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fingerprint } from "../../components/host-key/probe";
import { driftJson, type StateExport } from "../support/engine";
import { requireTestHost } from "./harness";
import { STACK, startTestHostFixture, TestHostFixture } from "./testhost-stack";

const enabled = requireTestHost();
const STEP = 10 * 60_000;
const KEY_FILE = "/etc/gpuhost/sglang-api-key.yaml";
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");

describe.runIf(enabled)("testhost stack: secrets on the host", () => {
  let f: TestHostFixture;
  const oldKey = `sk-old-${randomBytes(16).toString("hex")}`;
  const newKey = `sk-new-${randomBytes(16).toString("hex")}`;
  const sh = (cmd: string) => f.host.execOk(cmd).then((r) => r.stdout.trim());
  /** HTTP status of GET /v1/models on the service, from the host itself. */
  const statusWith = (key: string) =>
    sh(
      `curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer ${key}' http://127.0.0.1:${f.servicePort}/v1/models`,
    );
  /** Every process's argv on the host, NUL-separated words joined by spaces, one line each. */
  const allArgv = () => sh("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done");

  beforeAll(async () => {
    // the key set with the SSH key, in one engine command
    f = await startTestHostFixture("security", {}, { secrets: { apiKey: oldKey } });
  }, 30 * 60_000);

  afterAll(async () => {
    await f?.stop();
  }, 120_000);

  it(
    "the key is in no process's argv; the gate authenticated with it; a wrong key gets 401",
    async () => {
      const up = await f.stack.pulumi("up", "--yes", "--skip-preview");
      expect(up.code, up.stdout + up.stderr).toBe(0); // VerifiedGeneration's gate sent the key and got answers
      const pid = await sh("systemctl show -p MainPID --value sglang-autoregressive.service");
      expect(Number(pid)).toBeGreaterThan(0);
      const cmdline = await sh(`tr '\\0' ' ' < /proc/${pid}/cmdline`);
      expect(cmdline).toContain("--config /run/credentials/sglang-autoregressive.service/sglang-server-args.yaml");
      expect(cmdline).not.toContain(oldKey);
      expect(await allArgv()).not.toContain(oldKey);
      // nor in the service's environment (systemd's EnvironmentFile= would have put it there)
      expect(await sh(`tr '\\0' '\\n' < /proc/${pid}/environ`)).not.toContain(oldKey);
      // the key file: root-only; the service's copy: its user's only
      expect(await sh(`stat -c '%a %U' ${KEY_FILE}`)).toBe("600 root");
      expect(await statusWith(oldKey)).toBe("200");
      expect(await statusWith(`${oldKey}x`)).toBe("401");
      expect(await sh(`curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:${f.servicePort}/v1/models`)).toBe(
        "401",
      );
      // a local user who is not the service's cannot read the key from anywhere the service uses
      const asNobody = await f.host.exec(
        `runuser -u nobody -- cat ${KEY_FILE} /run/credentials/sglang-autoregressive.service/sglang-server-args.yaml`,
      );
      expect(asNobody.code).not.toBe(0);
      expect(asNobody.stdout).not.toContain(oldKey);
      // no offline oracle: neither the state nor the host's stamp holds a bare sha256 of the key
      const bare = createHash("sha256").update(oldKey).digest("hex");
      const state = (await f.stack.pulumiOk("stack", "export")).stdout;
      expect(state).not.toContain(bare);
      expect(
        await sh("stat -c '%a' /var/lib/gpuhost/units /var/lib/gpuhost/units/sglang-autoregressive.service.stamp"),
      ).toBe("700\n600");
    },
    STEP,
  );

  it(
    "rotation: config set --secret apiKey + up reaches the host; the old key stops working",
    async () => {
      await f.stack.pulumiOk("config", "set", "--secret", "gpuhost:apiKey", newKey);
      const up = await f.stack.pulumi("up", "--yes", "--skip-preview");
      expect(up.code, up.stdout + up.stderr).toBe(0);
      expect(await statusWith(newKey)).toBe("200");
      expect(await statusWith(oldKey)).toBe("401");
      const file = await sh(`cat ${KEY_FILE}`);
      expect(file).toContain(newKey);
      expect(file).not.toContain(oldKey);
      expect(await allArgv()).not.toContain(newKey);
      // neither key reached the state or the outputs in plaintext
      const state = (await f.stack.pulumiOk("stack", "export")).stdout;
      expect(state).not.toContain(newKey);
      expect(state).not.toContain(oldKey);
    },
    STEP,
  );

  it(
    "the API key file is watched: deleted or changed, refresh reports it and the next up rewrites it",
    async () => {
      await sh(`rm ${KEY_FILE}`);
      const refresh = await f.stack.refreshPreview();
      expect(refresh.code).not.toBe(0);
      expect(refresh.stdout + refresh.stderr).toContain("apiKeyFile");
      const up = await f.stack.pulumi("up", "--yes", "--skip-preview");
      expect(up.code, up.stdout + up.stderr).toBe(0);
      expect(await sh(`stat -c '%a %U' ${KEY_FILE}`)).toBe("600 root");
      expect(await sh(`cat ${KEY_FILE}`)).toContain(newKey);
      await sh(`sed -i 's/sk-new-/sk-bad-/' ${KEY_FILE}`);
      const again = await f.stack.pulumi("up", "--yes", "--skip-preview");
      expect(again.code, again.stdout + again.stderr).toBe(0);
      expect(await sh(`cat ${KEY_FILE}`)).toContain(newKey);
      expect(await statusWith(newKey)).toBe("200");
      // the comparison happened on the host: no hash of the key in the state
      const state = (await f.stack.pulumiOk("stack", "export")).stdout;
      expect(state).not.toContain(createHash("sha256").update(newKey).digest("hex"));
      expect(state).not.toContain(newKey);
    },
    STEP,
  );

  /**
   * The repair's order on the host, read after `up` returned: the key file was written before the
   * service's current start (a new main process, answering with the configured key), and the gate
   * ran on that start (VerifiedGeneration recorded the activation id the repair's restart wrote, at
   * a time after it began).
   */
  async function expectFileRestartGate(pidBefore: string) {
    const unit = "sglang-autoregressive.service";
    expect(await statusWith(newKey)).toBe("200");
    expect(await sh(`systemctl show -p MainPID --value ${unit}`)).not.toBe(pidBefore);
    const written = Date.parse(await sh(`date -u -r ${KEY_FILE} +%Y-%m-%dT%H:%M:%S.%3NZ`));
    // "Wed 2026-12-02 12:40:01.123456 UTC"
    const shown = await sh(`systemctl show -p ExecMainStartTimestamp --value --timestamp=us+utc ${unit}`);
    const m = /(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d\.\d{3})\d* UTC$/.exec(shown);
    expect(m, shown).not.toBeNull();
    const started = Date.parse(`${m![1]}T${m![2]}Z`);
    expect(written).toBeLessThanOrEqual(started);
    const state = JSON.parse((await f.stack.pulumiOk("stack", "export")).stdout) as StateExport;
    const verified = state.deployment.resources.find((r) => r.urn.endsWith("::testhost-verified"))!;
    const activation = await sh(`cat /var/lib/gpuhost/units/${unit}.activation`);
    expect(verified.inputs!.activation).toMatch(new RegExp(` repaired ${escape(activation)}$`));
    expect(verified.outputs!.generating).toBe(true);
    expect(Date.parse(verified.outputs!.verifiedAt as string)).toBeGreaterThanOrEqual(started);
  }

  it(
    "changed and the unit restarted with it (issue 19.2): gpuhost drift names the service's key; the next up rewrites the file, restarts the unit and the gate verifies it",
    async () => {
      // Another stack's key written and the unit restarted with it (a reboot does the same).
      await sh(`sed -i 's/sk-new-/sk-bad-/' ${KEY_FILE} && systemctl restart sglang-autoregressive.service`);
      // Once it listens again (bounded), it refuses the configured key: what drift must name.
      const answer = await sh(
        `for i in $(seq 150); do c=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer ${newKey}' http://127.0.0.1:${f.servicePort}/v1/models) && break; sleep 0.2; done; echo "$c"`,
      );
      expect(answer).toBe("401");
      const pidBefore = await sh("systemctl show -p MainPID --value sglang-autoregressive.service");
      const drift = await driftJson(STACK, f.stack.opts);
      expect(drift.report.exitCode, JSON.stringify(drift.report)).toBe(1);
      expect(drift.report.errors).toEqual([]);
      expect(drift.fields).toEqual(
        expect.arrayContaining(["apiKeyFile", "units./etc/systemd/system/sglang-autoregressive.service.apiKey"]),
      );
      const up = await f.stack.pulumi("up", "--yes", "--skip-preview");
      expect(up.code, up.stdout + up.stderr).toBe(0);
      // The restart the repair made was verified in the same up.
      expect(up.stdout).toMatch(/VerifiedGeneration[^\n]*replaced/);
      expect(await sh(`cat ${KEY_FILE}`)).toContain(newKey);
      await expectFileRestartGate(pidBefore);
    },
    STEP,
  );

  it(
    "deleted and the unit restarted (issue 19.2): the next up writes the file, starts the unit and the gate verifies it",
    async () => {
      const pidBefore = await sh("systemctl show -p MainPID --value sglang-autoregressive.service");
      // systemd cannot start the unit without its credential: it stays failed until the file is back.
      await sh(`rm ${KEY_FILE}; systemctl restart sglang-autoregressive.service || true`);
      const up = await f.stack.pulumi("up", "--yes", "--skip-preview");
      expect(up.code, up.stdout + up.stderr).toBe(0);
      expect(up.stdout).toMatch(/VerifiedGeneration[^\n]*replaced/);
      expect(await sh(`stat -c '%a %U' ${KEY_FILE}`)).toBe("600 root");
      await expectFileRestartGate(pidBefore);
    },
    STEP,
  );

  // Last: it swaps the host's sshd key, after which the harness's own (pinned) client is refused too.
  it(
    "host keys: unpinned is refused naming the presented key; trust-on-first-use records it, says so, and refuses a swapped key; insecure warns",
    async () => {
      const first = f.host.hostKey;
      const hostsWith = (connection: Record<string, unknown>) => ({
        hosts: [
          {
            name: "testhost",
            connection: { kind: "ssh", host: f.host.host, port: f.host.port, user: "root", ...connection },
            gpus: { count: 0 },
          },
        ],
      });
      await f.stack.setConfig(hostsWith({}));
      const unpinned = await f.stack.pulumi("preview");
      expect(unpinned.code).not.toBe(0);
      const refusal = unpinned.stdout + unpinned.stderr;
      expect(refusal).toContain("gpuhost:hosts[0].connection.hostKey is unset and hostKeyPolicy is pinned");
      expect(refusal).toContain(fingerprint(first));

      await f.stack.setConfig(hostsWith({ hostKeyPolicy: "trust-on-first-use" }));
      const tofu = await f.stack.pulumi("up", "--yes", "--skip-preview");
      expect(tofu.code, tofu.stdout + tofu.stderr).toBe(0);
      expect(tofu.stdout + tofu.stderr).toMatch(
        new RegExp(`trusting 127\\.0\\.0\\.1's host key ${escape(fingerprint(first))}, recorded on first use`),
      );

      // an impostor, or a reinstall: a new sshd key on the same address
      const keyFile = path.join(f.host.rootDir, "etc/ssh/ssh_host_ed25519_key");
      fs.rmSync(keyFile);
      fs.rmSync(`${keyFile}.pub`);
      execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", keyFile]);
      const second = fs.readFileSync(`${keyFile}.pub`, "utf8").split(" ").slice(0, 2).join(" ");
      await f.host.exec("systemctl restart ssh");
      const swapped = await f.stack.pulumi("up", "--yes", "--skip-preview");
      expect(swapped.code).not.toBe(0);
      const out = swapped.stdout + swapped.stderr;
      expect(out).toContain(fingerprint(second));
      expect(out).toContain(fingerprint(first));
      expect(out).toMatch(/refused/);

      await f.stack.setConfig(hostsWith({ hostKeyPolicy: "insecure-accept-any" }));
      // A plain up, refresh included: the refresh reads with the connection in the state, which pins
      // the first key; the reads refused on it keep their record and the update uses the key accepted
      // now (README "Rotating the SSH key"). Before, this up needed --refresh=false.
      const insecure = await f.stack.pulumi("up", "--yes", "--skip-preview");
      expect(insecure.code, insecure.stdout + insecure.stderr).toBe(0);
      expect(insecure.stdout + insecure.stderr).toContain(
        `hostKeyPolicy is insecure-accept-any: accepting ${fingerprint(second)}`,
      );
      expect(insecure.stdout + insecure.stderr).toContain("not probed"); // the refresh kept the record
    },
    STEP,
  );
});
