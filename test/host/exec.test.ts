// execOnHost and the command line shared with hostScript: local and simulated runs for real,
// and SSH for real against an sshd started on loopback for this test (skipped, and saying so,
// where sshd or ssh-keygen is missing).
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fingerprint } from "../../components/host-key/probe";
import { execOnHost, sshArgs, sshBaseArgs } from "../../components/host/exec";
import { renderInvocation } from "../../components/host/invocation";
import { hostCommandLine } from "../../components/host/script";
import { acceptsConnections } from "../../ports";
import { simShimDir, simulatedConnection } from "../../sim-host/platform";
import { expectPlainSentences } from "../support/plain-message";
import { leftBehind } from "../support/processes";

const canary = path.join(os.tmpdir(), `gpuhost-exec-pwned-${process.pid}`);
const hostileArgs = [`x; touch ${canary}`, `$(touch ${canary})`, "two words", "it's", "a\nb"];
const echoArgs = `for a in "$@"; do printf '[%s]\\n' "$a"; done`;
const expectedEcho = hostileArgs.map((a) => `[${a}]`).join("\n") + "\n";

describe("renderInvocation", () => {
  it("renders sudo -n, env and the script as base64 with every argument quoted", () => {
    const line = renderInvocation({
      scriptText: "echo hi\n",
      scriptName: "x.sh",
      args: ["a b", "c"],
      environment: { Z: "1 2" },
      sudo: true,
    });
    expect(line).toBe(
      `sudo -n env Z='1 2' bash -c "$(printf %s ${Buffer.from("echo hi\n").toString("base64")} | base64 -d)" x.sh 'a b' c`,
    );
  });

  it("hostScript's command line: sudo for non-root SSH users only, GPUHOST_ROOT and shims on the simulated host", () => {
    const script = { text: "true\n", name: "t.sh" };
    const ssh = { kind: "ssh" as const, host: "h", port: 22, privateKey: "k" };
    // Over SSH: sudo first, then the watch of the session (remote-session.ts), then the script.
    expect(hostCommandLine({ ...ssh, user: "ubuntu" }, script, [])).toMatch(
      /^exec sudo -n bash -c '[\s\S]*gpuhost_session[\s\S]*' gpuhost-session "\$PPID" "\$\{GPUHOST_SESSION_SILENCE_S:-0\}" 'bash -c /,
    );
    expect(hostCommandLine({ ...ssh, user: "root" }, script, [])).toMatch(
      /^exec bash -c '[\s\S]*gpuhost_session[\s\S]*' gpuhost-session "\$PPID" "\$\{GPUHOST_SESSION_SILENCE_S:-0\}" 'bash -c /,
    );
    // Paths inside the working directory (the program's folder, where Pulumi runs commands) are
    // written relative to "$PWD", so a moved checkout renders the same command; others stay absolute.
    const shims = path.relative(process.cwd(), simShimDir());
    expect(hostCommandLine(simulatedConnection("/tmp/s p"), script, ["x"])).toBe(
      `env GPUHOST_ROOT='/tmp/s p' PATH="$PWD"/${shims}:"$PATH" bash -c "$(printf %s dHJ1ZQo= | base64 -d)" t.sh x`,
    );
    expect(hostCommandLine(simulatedConnection(".gpuhost/sim-hosts/a b"), script, [])).toMatch(
      /^env GPUHOST_ROOT="\$PWD"\/'\.gpuhost\/sim-hosts\/a b' PATH=/,
    );
  });

  it("a relative path variable resolves where the command runs, even with spaces", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-pwd-"));
    fs.mkdirSync(path.join(dir, "r o"));
    const line = renderInvocation({
      scriptText: 'printf %s "$GPUHOST_ROOT"',
      scriptName: "t.sh",
      args: [],
      pathEnvironment: { GPUHOST_ROOT: "r o" },
    });
    const out = execFileSync("/bin/sh", ["-c", line], { cwd: dir, encoding: "utf8" });
    expect(out).toBe(path.join(fs.realpathSync(dir), "r o"));
  });
});

describe("execOnHost, local and simulated", () => {
  it("passes hostile arguments through unchanged and runs none of them", async () => {
    fs.rmSync(canary, { force: true });
    const r = await execOnHost(simulatedConnection(os.tmpdir()), echoArgs, hostileArgs);
    expect(r).toEqual({ code: 0, stdout: expectedEcho, stderr: "" });
    expect(fs.existsSync(canary)).toBe(false);
  });

  it("gives the simulated host GPUHOST_ROOT and the shims first on PATH; local gets neither", async () => {
    const sim = await execOnHost(
      simulatedConnection("/tmp/gpuhost-sim-x"),
      'echo "$GPUHOST_ROOT"; command -v systemctl',
      [],
    );
    expect(sim.stdout).toBe(`/tmp/gpuhost-sim-x\n${path.join(simShimDir(), "systemctl")}\n`);
    const local = await execOnHost({ kind: "local" }, 'echo "root=${GPUHOST_ROOT:-unset}"', []);
    expect(local.stdout).toBe("root=unset\n");
  });

  it("reports exit codes and stderr, and kills at the timeout with code 124", async () => {
    expect(await execOnHost({ kind: "local" }, "echo out; echo err >&2; exit 7", [])).toEqual({
      code: 7,
      stdout: "out\n",
      stderr: "err\n",
    });
    const t = await execOnHost({ kind: "local" }, "sleep 5", [], { timeoutMs: 200 });
    expect(t.code).toBe(124);
    expect(t.stderr).toContain("timed out after 200 ms");
  });

  it("rejects an invalid connection before running anything", async () => {
    await expect(
      execOnHost({ kind: "ssh", host: "x;id", port: 22, user: "root", privateKey: "k" } as never, "true", []),
    ).rejects.toThrow(/connection\.host/);
  });
});

describe("sshArgs", () => {
  const key = "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----";
  it("writes keys 0600, checks host keys strictly when one is given, and quotes the bastion hop", () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-sshargs-"));
    try {
      const strict = sshArgs(
        { kind: "ssh", host: "h.example", port: 2222, user: "ubuntu", privateKey: key, hostKey: "ssh-ed25519 AAAAC3" },
        tmp,
        "cmd",
      );
      expect(fs.statSync(path.join(tmp, "id_target")).mode & 0o777).toBe(0o600);
      expect(strict).toContain("StrictHostKeyChecking=yes");
      expect(strict).toContain("ServerAliveInterval=15");
      expect(strict).toContain("ServerAliveCountMax=4");
      expect(fs.readFileSync(path.join(tmp, "target.known_hosts"), "utf8")).toBe(
        "[h.example]:2222 ssh-ed25519 AAAAC3\n",
      );
      expect(strict.slice(-3)).toEqual(["ubuntu@h.example", "--", "cmd"]);
      const loose = sshArgs(
        {
          kind: "ssh",
          host: "h",
          port: 22,
          user: "root",
          privateKey: key,
          bastion: { host: "jump", port: 2200, user: "hop", privateKey: key },
        },
        tmp,
        "cmd",
      );
      // no pinned key: still strict, against an empty known_hosts (every key refused)
      expect(loose).not.toContain("StrictHostKeyChecking=no");
      expect(loose).toContain("StrictHostKeyChecking=yes");
      expect(fs.readFileSync(path.join(tmp, "target.known_hosts"), "utf8")).toBe("");
      const proxy = loose.find((a) => a.startsWith("ProxyCommand="))!;
      expect(proxy).toContain("StrictHostKeyChecking=yes");
      expect(proxy).not.toContain("StrictHostKeyChecking=no");
      expect(proxy).toContain("%%t %%K");
      expect(proxy).toContain(`-i ${path.join(tmp, "id_bastion")} -p 2200`);
      expect(proxy).toContain("-W %h:%p hop@jump");
      expect(fs.statSync(path.join(tmp, "id_bastion")).mode & 0o777).toBe(0o600);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  it('sshBaseArgs is everything sshArgs puts before "--", ending with user@host (a tunnel\'s session)', () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-sshargs-"));
    try {
      const conn = {
        kind: "ssh" as const,
        host: "h.example",
        port: 2222,
        user: "ubuntu",
        privateKey: key,
        hostKey: "ssh-ed25519 AAAAC3",
        bastion: { host: "jump", port: 2200, user: "hop", privateKey: key },
      };
      const base = sshBaseArgs(conn, tmp);
      expect(base.at(-1)).toBe("ubuntu@h.example");
      expect(base).not.toContain("--");
      expect(sshArgs(conn, tmp, "cmd")).toEqual([...base, "--", "cmd"]);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
});

// ---- a real sshd on loopback ----
const haveSsh =
  ["/usr/sbin/sshd", "/usr/bin/ssh-keygen", "/usr/bin/ssh"].every((f) => fs.existsSync(f)) && process.getuid?.() === 0;
describe.skipIf(!haveSsh)("execOnHost over a real sshd on 127.0.0.1 (skipped without sshd/root)", () => {
  let dir: string;
  let sshd: ChildProcess;
  let port: number;
  let privateKey: string;
  let hostKey: string;
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-sshd-"));
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", path.join(dir, "host_key")]);
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", path.join(dir, "client_key")]);
    fs.copyFileSync(path.join(dir, "client_key.pub"), path.join(dir, "authorized_keys"));
    privateKey = fs.readFileSync(path.join(dir, "client_key"), "utf8");
    hostKey = fs.readFileSync(path.join(dir, "host_key.pub"), "utf8").split(" ").slice(0, 2).join(" ");
    port = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, "127.0.0.1", () => {
        const p = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    fs.writeFileSync(
      path.join(dir, "sshd_config"),
      [
        `ListenAddress 127.0.0.1:${port}`,
        `HostKey ${path.join(dir, "host_key")}`,
        `AuthorizedKeysFile ${path.join(dir, "authorized_keys")}`,
        "PasswordAuthentication no",
        "PermitRootLogin prohibit-password",
        "StrictModes no",
        "UsePAM no",
        `PidFile ${path.join(dir, "sshd.pid")}`,
        "",
      ].join("\n"),
    );
    fs.mkdirSync("/run/sshd", { recursive: true });
    sshd = spawn("/usr/sbin/sshd", ["-D", "-e", "-f", path.join(dir, "sshd_config")], { stdio: "ignore" });
    for (let i = 0; i < 50; i++) {
      if (await acceptsConnections(port)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  });
  afterAll(() => {
    sshd?.kill("SIGTERM");
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("runs the script with hostile arguments intact, checking the host key", async () => {
    fs.rmSync(canary, { force: true });
    const r = await execOnHost(
      { kind: "ssh", host: "127.0.0.1", port, user: "root", privateKey, hostKey },
      echoArgs,
      hostileArgs,
    );
    expect(r.stderr).toBe("");
    expect(r).toMatchObject({ code: 0, stdout: expectedEcho });
    expect(fs.existsSync(canary)).toBe(false);
  });

  it("a command whose session ends (its client killed at the timeout) stops on the host too", async () => {
    // sshd sends no SIGHUP without a PTY: unwatched, the sleep would run on for its minute.
    const pidFile = path.join(dir, "remote-sleep.pid");
    const r = await execOnHost(
      { kind: "ssh", host: "127.0.0.1", port, user: "root", privateKey, hostKey },
      `sleep 60 & echo $! >${pidFile}; wait`,
      [],
      { timeoutMs: 5000 },
    );
    expect(r.code).toBe(124);
    const pid = Number(fs.readFileSync(pidFile, "utf8"));
    expect(await leftBehind(new Map([[pid, "sleep 60"]]), 10)).toEqual([]);
  }, 30_000);

  it("refuses a host whose key does not match, and passes exit codes through", async () => {
    const wrong = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBm7M2bJ6oZ3oGZ4d2lhZ2Vob3N0a2V5bm90dGhpc29uZQ";
    const r = await execOnHost(
      { kind: "ssh", host: "127.0.0.1", port, user: "root", privateKey, hostKey: wrong },
      "echo ran",
      [],
    );
    expect(r.code).toBe(255);
    expect(r.stdout).toBe("");
    // The refusal alone, in plain sentences: OpenSSH's banner is not passed on.
    expect(r.stderr).toBe(r.hostKeyRefusal);
    expectPlainSentences(r.stderr);
    expect(r.stderr).toContain(
      `127.0.0.1:${port} presented ssh-ed25519 ${fingerprint(hostKey)}, but hostKey pins ssh-ed25519 ${fingerprint(wrong)}: refused, nothing was run.`,
    );
    expect(r.stderr).toContain(`pin the new key "${hostKey}"`);
    const e = await execOnHost(
      { kind: "ssh", host: "127.0.0.1", port, user: "root", privateKey, hostKey },
      "exit 3",
      [],
    );
    expect(e.code).toBe(3);
  });

  it("refuses a host without a pinned key, runs nothing, and names the key it presented", async () => {
    fs.rmSync(canary, { force: true });
    const r = await execOnHost(
      { kind: "ssh", host: "127.0.0.1", port, user: "root", privateKey },
      `touch ${canary}`,
      [],
    );
    expect(r.code).toBe(255);
    expect(r.stderr).toContain(
      `refused, hostKey is unset; it presented ssh-ed25519 ${fingerprint(hostKey)} ("${hostKey}")`,
    );
    expect(r.stderr).toBe(r.hostKeyRefusal);
    expectPlainSentences(r.stderr);
    expect(fs.existsSync(canary)).toBe(false);
    // through an unpinned bastion (the same sshd as jump host): refused at the bastion
    const b = await execOnHost(
      {
        kind: "ssh",
        host: "127.0.0.1",
        port,
        user: "root",
        privateKey,
        hostKey,
        bastion: { host: "127.0.0.1", port, user: "root", privateKey },
      },
      "echo ran",
      [],
    );
    expect(b.code).toBe(255);
    expect(b.stderr).toContain("refused, bastion.hostKey is unset");
    const ok = await execOnHost(
      {
        kind: "ssh",
        host: "127.0.0.1",
        port,
        user: "root",
        privateKey,
        hostKey,
        bastion: { host: "127.0.0.1", port, user: "root", privateKey, hostKey },
      },
      "echo via-bastion",
      [],
    );
    expect(ok).toMatchObject({ code: 0, stdout: "via-bastion\n" });
  });
});
