/**
 * Host scripts for a non-root SSH user go through `sudo -n` (no PTY, so sudo must never prompt):
 * on a real Debian host, a user with passwordless sudo runs a host script as root through the same
 * execOnHost path the dynamic providers use (and the same rendering hostScript gives @pulumi/command),
 * and a user without it fails at once with sudo's own message instead of hanging at a prompt.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execOnHost } from "../../components/host/exec";
import { SESSION_KILL_GRACE_SECONDS } from "../../components/host/remote-session";
import { bootTestHost, connectionOf, requireTestHost, TestHost } from "./harness";
import { hostLeftBehind } from "./host-processes";

const enabled = requireTestHost();

describe.runIf(enabled)("sudo -n for a non-root SSH user (real Debian host)", () => {
  let host: TestHost;

  beforeAll(async () => {
    host = await bootTestHost({ name: "sudo" });
    // Two users with the harness's key: `deploy` may sudo without a password, `plain` may not.
    await host.execOk(
      [
        "set -e",
        "for u in deploy plain; do useradd -m -s /bin/bash $u; install -d -m 0700 -o $u -g $u /home/$u/.ssh;",
        "  install -m 0600 -o $u -g $u /root/.ssh/authorized_keys /home/$u/.ssh/authorized_keys; done",
        "echo 'deploy ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/deploy && chmod 0440 /etc/sudoers.d/deploy",
      ].join("\n"),
    );
  }, 30 * 60_000);

  afterAll(async () => {
    await host?.stop();
  }, 60_000);

  const as = (user: string) => connectionOf(host, user);
  const script = 'set -euo pipefail\necho "uid=$(id -u) arg=$1"\ntouch /root/written-by-"$1"\n';

  it("a user with passwordless sudo runs the script as root, arguments intact", async () => {
    const r = await execOnHost(as("deploy"), script, ["deploy it's"], { timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe("uid=0 arg=deploy it's");
    expect((await host.execOk("ls /root")).stdout).toContain("written-by-deploy it's");
  }, 120_000);

  it("a user without it fails at once with sudo's message, never a prompt", async () => {
    const started = Date.now();
    const r = await execOnHost(as("plain"), script, ["plain"], { timeoutMs: 60_000 });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/sudo: a password is required/);
    expect(Date.now() - started).toBeLessThan(30_000);
    expect((await host.execOk("ls /root")).stdout).not.toContain("written-by-plain");
  }, 120_000);

  it("a root command that ignores SIGTERM, its client gone: the session's watch, root through sudo, kills it", async () => {
    // The script and the sleep it starts ignore SIGTERM (an ignored signal stays ignored in children):
    // only SIGKILL, from root, ends them. A watch running as `deploy` could signal sudo alone.
    const hang = "trap '' TERM\necho \"uid=$(id -u)\" >/root/hang-started\nsleep 600 &\nwait\n";
    const started = Date.now();
    // execOnHost's bound kills its ssh client: the session ends with the command still running.
    const r = await execOnHost(as("deploy"), hang, [], { timeoutMs: 5_000 });
    expect(r.code).not.toBe(0);
    expect((await host.execOk("cat /root/hang-started")).stdout.trim()).toBe("uid=0");
    const left = await hostLeftBehind(host, 3 * SESSION_KILL_GRACE_SECONDS);
    expect(left).toEqual([]);
    console.log(
      `[sudo] a root command ignoring SIGTERM was gone ${((Date.now() - started) / 1000).toFixed(1)} s after its client started`,
    );
  }, 120_000);
});
