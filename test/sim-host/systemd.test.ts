// The simulated host's systemctl/journalctl shims, driven as the services' scripts drive them.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { execOnHost } from "../../components/host/exec";
import { prepareSimulatedHost, simulatedConnection } from "../../sim-host/platform";

let root: string;
const sh = (cmd: string) => execOnHost(simulatedConnection(root), cmd, []);
const unit = (name: string, text: string) => fs.writeFileSync(path.join(root, "etc/systemd/system", name), text);
const wait = async (cond: () => Promise<boolean>) => {
  for (let i = 0; i < 100; i++) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("condition not reached");
};

beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-simd-"));
  prepareSimulatedHost(root);
  fs.mkdirSync(path.join(root, "opt/app"), { recursive: true });
  // Run on the simulated host's own files: /opt/app/serve lives under the root.
  fs.writeFileSync(
    path.join(root, "opt/app/serve"),
    '#!/bin/bash\necho "serving $GREETING key=$API_KEY args=$*"\n[ -n "${CRASH:-}" ] && { echo "fatal error: curand.h: No such file or directory"; exit 1; }\nexec sleep 300\n',
    { mode: 0o755 },
  );
  fs.writeFileSync(path.join(root, "etc/gpuhost.env"), "API_KEY=s3cret\n", { mode: 0o600 });
  const base = (extra: string) =>
    `[Unit]\nDescription=test\n${extra}\n[Service]\nEnvironment="GREETING=hello world"\nEnvironmentFile=/etc/gpuhost.env\nExecStart=/opt/app/serve --port 30001\nRestart=on-failure\nRestartSec=0.1\n[Install]\nWantedBy=multi-user.target\n`;
  unit("ar.service", base("Conflicts=eagle.service"));
  unit("eagle.service", base("Conflicts=ar.service"));
  unit("crashy.service", base("StartLimitBurst=3").replace("Environment=", "Environment=CRASH=1\nEnvironment="));
});
afterEach(async () => {
  await sh("systemctl stop ar eagle crashy cred");
  fs.rmSync(root, { recursive: true, force: true });
});

describe("simulated systemctl/journalctl", () => {
  it("enable, start with Environment= and EnvironmentFile=, is-active, show, journalctl", async () => {
    expect((await sh("systemctl daemon-reload && systemctl enable ar.service && systemctl start ar")).code).toBe(0);
    expect((await sh("systemctl is-enabled ar")).stdout).toBe("enabled\n");
    expect((await sh("systemctl is-enabled eagle")).code).toBe(1);
    expect(fs.readlinkSync(path.join(root, "etc/systemd/system/multi-user.target.wants/ar.service"))).toBe(
      "../ar.service",
    );
    expect(await sh("systemctl is-active ar")).toMatchObject({ code: 0, stdout: "active\n" });
    expect((await sh("systemctl show -p NRestarts,ActiveState ar")).stdout).toBe("NRestarts=0\nActiveState=active\n");
    await wait(async () => (await sh("journalctl -u ar -n 1")).stdout.includes("serving"));
    expect((await sh("journalctl -u ar -n 1 --no-pager")).stdout).toBe(
      "serving hello world key=s3cret args=--port 30001\n",
    );
    expect((await sh("systemctl stop ar; systemctl is-active ar")).stdout).toBe("inactive\n");
  });

  it("the host's folder moved while a unit runs (a checkout moved with mv): it keeps running and stops from there", async () => {
    expect((await sh("systemctl start ar")).code).toBe(0);
    await wait(async () => (await sh("journalctl -u ar -n 1")).stdout.includes("serving"));
    const moved = `${root}-moved`;
    fs.renameSync(root, moved);
    root = moved;
    expect((await sh("systemctl show -p NRestarts,ActiveState ar")).stdout).toBe("NRestarts=0\nActiveState=active\n");
    // The supervisor, started at the old path, still finds the unit's state: stop reaches it.
    expect((await sh("systemctl stop ar; systemctl is-active ar")).stdout).toBe("inactive\n");
    expect(fs.readdirSync(path.dirname(root)).filter((d) => d === path.basename(root).replace(/-moved$/, ""))).toEqual(
      [],
    );
  });

  it("LoadCredential= hands a root-only file to the service as %d/<id> (a private copy); a missing one fails the start", async () => {
    fs.mkdirSync(path.join(root, "etc/gpuhost"), { recursive: true });
    fs.writeFileSync(path.join(root, "etc/gpuhost/k.yaml"), 'api-key: "s3cret"\n', { mode: 0o600 });
    unit(
      "cred.service",
      "[Service]\nLoadCredential=server-args.yaml:/etc/gpuhost/k.yaml\nExecStart=/opt/app/serve --config %d/server-args.yaml --pct 100%%\n",
    );
    expect((await sh("systemctl start cred")).code).toBe(0);
    await wait(async () => (await sh("journalctl -u cred -n 1")).stdout.includes("serving"));
    const copy = path.join(root, "run/credentials/cred.service/server-args.yaml");
    expect((await sh("journalctl -u cred -n 1 --no-pager")).stdout).toBe(
      `serving  key= args=--config ${copy} --pct 100%\n`,
    );
    expect(fs.readFileSync(copy, "utf8")).toBe('api-key: "s3cret"\n');
    expect(fs.statSync(copy).mode & 0o777).toBe(0o400);
    await sh("systemctl stop cred");
    fs.rmSync(path.join(root, "etc/gpuhost/k.yaml"));
    await sh("systemctl start cred");
    await wait(async () => (await sh("systemctl is-active cred")).stdout === "failed\n");
    expect((await sh("journalctl -u cred --no-pager")).stdout).toContain("status=243/CREDENTIALS");
  });

  it("Conflicts= leaves exactly one of two services active", async () => {
    await sh("systemctl start ar");
    expect((await sh("systemctl start eagle; systemctl is-active ar eagle")).stdout).toBe("inactive\nactive\n");
    expect((await sh("systemctl start ar; systemctl is-active ar eagle")).stdout).toBe("active\ninactive\n");
  });

  it("several units at once, as systemctl(1) answers them: a line each, exit 0 when any one matches", async () => {
    await sh("systemctl enable ar && systemctl start ar");
    expect(await sh("systemctl is-active eagle ar")).toMatchObject({ code: 0, stdout: "inactive\nactive\n" });
    expect(await sh("systemctl is-active eagle crashy")).toMatchObject({ code: 3, stdout: "inactive\ninactive\n" });
    expect(await sh("systemctl is-enabled eagle ar")).toMatchObject({ code: 0, stdout: "disabled\nenabled\n" });
    expect(await sh("systemctl is-enabled eagle crashy")).toMatchObject({ code: 1, stdout: "disabled\ndisabled\n" });
    // A unit file that is gone: a message on stderr and no line, so a caller cannot pair lines with units.
    fs.rmSync(path.join(root, "etc/systemd/system/eagle.service"));
    expect(await sh("systemctl is-enabled eagle ar")).toMatchObject({ code: 0, stdout: "enabled\n" });
    expect(await sh("systemctl is-failed ar eagle")).toMatchObject({ code: 1, stdout: "active\ninactive\n" });
  });

  it("Restart=on-failure restarts a crashing service, counts NRestarts, then gives up at StartLimitBurst", async () => {
    expect((await sh("systemctl start crashy")).code).toBe(0); // Type=simple: a later crash is not a start failure
    await wait(async () => (await sh("systemctl is-active crashy")).stdout === "failed\n");
    expect((await sh("systemctl show -p NRestarts,ActiveState,Result crashy")).stdout).toBe(
      "NRestarts=2\nActiveState=failed\nResult=start-limit-hit\n",
    );
    const log = (await sh("journalctl -u crashy -n 50")).stdout;
    expect(log.match(/fatal error: curand\.h: No such file or directory/g)).toHaveLength(3);
    expect(log).toContain("Scheduled restart job, restart counter is at 2.");
    expect((await sh("journalctl -u crashy -n 2")).stdout.split("\n").filter(Boolean)).toHaveLength(2);
  });

  it("a missing ExecStart binary fails the start job like systemd's 203/EXEC; unknown units fail", async () => {
    unit("broken.service", "[Service]\nExecStart=/opt/nothing/here\n");
    const r = await sh("systemctl start broken");
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("Job for broken.service failed");
    expect((await sh("journalctl -u broken")).stdout).toContain("status=203/EXEC");
    expect((await sh("systemctl start nope")).code).toBe(5);
  });

  it("daemon-reload decides which unit content start uses", async () => {
    await sh("systemctl daemon-reload");
    unit(
      "ar.service",
      fs.readFileSync(path.join(root, "etc/systemd/system/ar.service"), "utf8").replace("hello world", "edited"),
    );
    await sh("systemctl start ar");
    await wait(async () => (await sh("journalctl -u ar")).stdout.includes("serving"));
    expect((await sh("journalctl -u ar")).stdout).toContain("serving hello world");
    await sh("systemctl daemon-reload && systemctl restart ar");
    await wait(async () => (await sh("journalctl -u ar")).stdout.includes("serving edited"));
  });

  it("a started service finds the shims first on its PATH (the source bin folder, found from the compiled supervisor)", async () => {
    fs.writeFileSync(
      path.join(root, "opt/app/which"),
      '#!/bin/bash\necho "systemctl=$(command -v systemctl)"\nexec sleep 300\n',
      { mode: 0o755 },
    );
    unit("which.service", "[Service]\nExecStart=/opt/app/which\n");
    try {
      expect((await sh("systemctl start which")).code).toBe(0);
      await wait(async () => (await sh("journalctl -u which")).stdout.includes("systemctl="));
      expect((await sh("journalctl -u which")).stdout).toContain(
        `systemctl=${path.resolve(__dirname, "../../sim-host/bin/systemctl")}\n`,
      );
    } finally {
      await sh("systemctl stop which");
    }
  });

  it("refuses to run without GPUHOST_ROOT (never the real /)", async () => {
    const r = await execOnHost(
      { kind: "local" },
      `${path.join(__dirname, "../../sim-host/bin/systemctl")} is-active ar`,
      [],
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("GPUHOST_ROOT must name the simulated root folder");
  });

  describe("concurrent operations (the manager lock)", () => {
    /** Live processes of this test's root (supervisors run inside it) whose command line contains every word. */
    const processes = (...words: string[]): number[] =>
      fs
        .readdirSync("/proc")
        .filter((d) => /^\d+$/.test(d))
        .filter((pid) => {
          try {
            const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
            const cwd = fs.readlinkSync(`/proc/${pid}/cwd`);
            const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
            return words.every((w) => cmd.includes(w)) && cwd === fs.realpathSync(root) && !/^\d+ \(.*\) Z/.test(stat);
          } catch {
            return false;
          }
        })
        .map(Number);

    it("five concurrent starts of one unit, and a start while it is activating: exactly one supervisor", async () => {
      const runs = await Promise.all(Array.from({ length: 5 }, () => sh("systemctl start ar")));
      expect(runs.map((r) => r.code)).toEqual([0, 0, 0, 0, 0]);
      expect(processes("__supervise", "ar.service")).toHaveLength(1);
      // A crashing unit spends its RestartSec in "activating": starting it then must not add a supervisor.
      unit(
        "slowcrash.service",
        "[Service]\nEnvironment=CRASH=1\nExecStart=/opt/app/serve\nRestart=on-failure\nRestartSec=20\n",
      );
      await sh("systemctl daemon-reload && systemctl start slowcrash");
      await wait(async () => (await sh("systemctl show -p ActiveState --value slowcrash")).stdout === "activating\n");
      await Promise.all([sh("systemctl start slowcrash"), sh("systemctl start slowcrash")]);
      expect(processes("__supervise", "slowcrash.service")).toHaveLength(1);
      await sh("systemctl stop slowcrash");
    });

    it("three units deleted concurrently (stop, remove the file, daemon-reload), ten rounds: every command succeeds", async () => {
      for (let round = 0; round < 10; round++) {
        for (const n of [1, 2, 3]) unit(`tmp${n}.service`, "[Service]\nExecStart=/opt/app/serve\n");
        expect((await sh("systemctl daemon-reload && systemctl start tmp1 tmp2 tmp3")).code).toBe(0);
        const deletes = await Promise.all(
          [1, 2, 3].map((n) =>
            sh(`systemctl stop tmp${n} && rm -f /etc/systemd/system/tmp${n}.service && systemctl daemon-reload`),
          ),
        );
        expect(deletes.map((d) => `${d.code} ${d.stderr}`)).toEqual(["0 ", "0 ", "0 "]);
      }
      expect(processes("__supervise")).toEqual([]);
    }, 120_000);
  });
});
