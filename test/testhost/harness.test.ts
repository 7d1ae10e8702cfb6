/**
 * The harness itself, on a real booted Debian host: SSH, systemd as PID 1, journald, teardown.
 * Fails loudly where nspawn cannot run, unless GPUHOST_SKIP_TESTHOST=1 (see README.md).
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bootTestHost, requireTestHost, TestHost } from "./harness";
import { ensureRootfsTree } from "./rootfs";

const enabled = requireTestHost();

describe.runIf(enabled)("test host harness (real systemd-nspawn Debian host)", () => {
  let host: TestHost;

  beforeAll(async () => {
    host = await bootTestHost({ name: "harness" });
  }, 30 * 60_000);

  afterAll(async () => {
    await host?.stop();
  }, 60_000);

  it("answers over SSH on loopback as root, running Debian bookworm with systemd as PID 1", async () => {
    expect(host.host).toBe("127.0.0.1");
    const r = await host.execOk("id -u; . /etc/os-release; echo $VERSION_CODENAME; cat /proc/1/comm");
    expect(r.stdout.split("\n").slice(0, 3)).toEqual(["0", "bookworm", "systemd"]);
    expect(host.privateKey).toContain("OPENSSH PRIVATE KEY");
  });

  it("rejects a client without the generated key", async () => {
    const { run } = await import("./proc");
    const r = await run(
      "ssh",
      [
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "PubkeyAuthentication=no",
        "-p",
        String(host.port),
        "root@127.0.0.1",
        "true",
      ],
      { allowFailure: true, timeoutMs: 20_000 },
    );
    expect(r.code).toBe(255);
    expect(r.stderr).toMatch(/Permission denied/);
  });

  it("runs a systemd unit started over SSH, and journalctl -u shows its lines", async () => {
    await host.execOk(
      [
        "cat > /etc/systemd/system/gpuhost-echo.service <<'EOF'",
        "[Unit]",
        "Description=test host echo",
        "[Service]",
        "ExecStart=/bin/sh -c 'echo gpuhost-echo-started; exec sleep infinity'",
        "EOF",
        "systemctl daemon-reload",
        "systemctl start gpuhost-echo.service",
      ].join("\n"),
    );
    const active = await host.exec("systemctl is-active gpuhost-echo.service");
    expect(active.stdout.trim()).toBe("active");
    // journald may lag the unit's first write by a moment
    let journal = "";
    for (let i = 0; i < 50 && !journal.includes("gpuhost-echo-started"); i++) {
      journal = (await host.execOk("journalctl -u gpuhost-echo.service --no-pager -o cat")).stdout;
      if (!journal.includes("gpuhost-echo-started")) await new Promise((r) => setTimeout(r, 200));
    }
    expect(journal).toContain("gpuhost-echo-started");
  });

  it("reports a failed unit as failed, with its exit in the journal", async () => {
    await host.execOk(
      [
        "cat > /etc/systemd/system/gpuhost-fail.service <<'EOF'",
        "[Service]",
        "Type=oneshot",
        "ExecStart=/bin/sh -c 'echo about-to-fail; exit 3'",
        "EOF",
        "systemctl daemon-reload",
      ].join("\n"),
    );
    const start = await host.exec("systemctl start gpuhost-fail.service");
    expect(start.code).not.toBe(0);
    expect((await host.exec("systemctl is-failed gpuhost-fail.service")).stdout.trim()).toBe("failed");
    const journal = (await host.execOk("journalctl -u gpuhost-fail.service --no-pager -o cat")).stdout;
    expect(journal).toContain("about-to-fail");
  });
});

describe.runIf(enabled)("test host teardown", () => {
  it(
    "stops the nspawn process it started, unmounts its overlay root and removes it; the cached tree below stays as it was",
    async () => {
      const host = await bootTestHost({ name: "teardown" });
      const root = host.rootDir;
      expect(existsSync(`${root}/etc/os-release`)).toBe(true);
      const mounts = () => readFileSync("/proc/self/mounts", "utf8");
      expect(mounts()).toContain(` ${root} overlay `);
      // A change of this host's own: it lands above the tree every host shares.
      writeFileSync(`${root}/etc/gpuhost-teardown-marker`, `${process.pid}\n`);
      await host.stop();
      expect(existsSync(root)).toBe(false);
      expect(mounts()).not.toContain(` ${root} `);
      const tree = await ensureRootfsTree();
      expect(existsSync(`${tree}/etc/os-release`)).toBe(true);
      expect(existsSync(`${tree}/etc/gpuhost-teardown-marker`)).toBe(false);
      const r = await host.exec("true", { timeoutMs: 10_000 });
      expect(r.code).toBe(255); // nobody answers on that port any more
    },
    5 * 60_000,
  );
});
