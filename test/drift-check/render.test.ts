// The scheduled drift check (components/drift-check), without the engine: the config section's
// refusals (one sentence at operations.driftCheck.<field>), the two units as rendered (exact keys,
// systemd's quoting proved by systemd's own parser), the calendar expressions proved by
// `systemd-analyze calendar`, and the embedded sim stack's check rendered into a simulated host's
// folder by the real scripts, twice (the second run changes nothing).
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError, parseConfig } from "../../stack/config";
import { driftCheckPlan, ENABLE_TIMER_SCRIPT, resolveDriftCheck } from "../../components/drift-check";
import { type ResolvedDriftCheck } from "../../components/drift-check/render";
import { DEFAULT_ON_CALENDAR } from "../../components/drift-check/schema";
import { execOnHost } from "../../components/host/exec";
import { PROJECT_ROOT } from "../../engine/pulumi";
import { prepareSimulatedHost, simulatedConnection } from "../../sim-host/platform";
import { stackConfig } from "../config/stacks";
import { run } from "../support/run";
import { systemdAnalyzeAvailable, verifyUnit } from "../services/systemd-analyze";

const here = { stack: "sim", projectDir: "/srv/gpuhost", nodePath: "/usr/bin/node", user: "ops" };

/** The sim stack's config with operations.driftCheck replaced by `check` (the machine kept). */
function configWith(check: Record<string, unknown>) {
  return stackConfig("sim", { operations: { driftCheck: { machine: { kind: "local" }, ...check } } });
}

function refusal(raw: Record<string, unknown>): string {
  try {
    parseConfig(raw);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error("accepted");
}

function settingsOf(check: Record<string, unknown>): ResolvedDriftCheck {
  const { machine: _machine, ...settings } = parseConfig(configWith(check)).operations.driftCheck!;
  return resolveDriftCheck(settings, here);
}

describe("operations.driftCheck: refusals name the field", () => {
  it.each([
    [{ onCalendar: "" }, "onCalendar", "must not be empty"],
    [{ onCalendar: "hourly\nExecStart=/bin/sh" }, "onCalendar", "calendar expression"],
    [{ onCalendar: "hourly; rm -rf /" }, "onCalendar", "calendar expression"],
    [{ onCalendar: "$(reboot)" }, "onCalendar", "calendar expression"],
    [{ onCalendar: "%H" }, "onCalendar", "calendar expression"],
    [{ randomizedDelaySec: -1 }, "randomizedDelaySec", ">="],
    [{ persistent: "yes" }, "persistent", "boolean"],
    [{ textfileDir: "relative/dir" }, "textfileDir", "absolute path"],
    [{ textfileDir: "/var/lib/../etc" }, "textfileDir", "'..'"],
    [{ textfileDir: "/var/lib/x\nExecStart=/bin/sh" }, "textfileDir", "newline"],
    [{ stack: "a b" }, "stack", "Pulumi stack name"],
    [{ user: "root; id" }, "user", "plain system user name"],
    [{ passphraseFile: "/etc/my pass" }, "passphraseFile", "absolute path of letters"],
    [{ backendUrl: "https://user:pw@api.example/" }, "backendUrl", "without credentials"],
    [{ timeoutSec: 0 }, "timeoutSec", ">="],
    [{ onCalender: "hourly" }, "onCalender", "unknown key"],
  ])("%j -> gpuhost:operations.driftCheck.%s", (check, field, words) => {
    const msg = refusal(configWith(check));
    expect(msg).toContain(`gpuhost:operations.driftCheck.${field}: `);
    expect(msg).toContain(words);
    expect(msg).not.toMatch(/\n\s+at /);
  });

  it("a machine that is none of the four kinds, a router that is not configured, a host that does not exist", () => {
    expect(refusal(stackConfig("sim", { operations: { driftCheck: { machine: { kind: "vm" } } } }))).toContain(
      "gpuhost:operations.driftCheck.machine.kind: must be { kind: local }",
    );
    expect(refusal(stackConfig("sim", { operations: { driftCheck: { machine: { kind: "router" } } } }))).toContain(
      "gpuhost:operations.driftCheck.machine: is the router's machine, but the stack configures no router",
    );
    expect(
      refusal(stackConfig("sim", { operations: { driftCheck: { machine: { kind: "host", name: "sim-9" } } } })),
    ).toContain("gpuhost:operations.driftCheck.machine.name: names no host of `hosts` (sim-9)");
    expect(
      refusal(
        stackConfig("sim", { operations: { driftCheck: { machine: { kind: "ssh", host: "10.0.0.5", port: 0 } } } }),
      ),
    ).toContain("gpuhost:operations.driftCheck.machine.port");
  });

  it("an operations machine over SSH takes the hosts' connection shape", () => {
    const c = parseConfig(
      stackConfig("sim", {
        operations: {
          driftCheck: { machine: { kind: "ssh", host: "10.0.0.5", user: "ops", privateKeySecret: "opsKey" } },
        },
      }),
    ).operations.driftCheck!;
    expect(c.machine).toMatchObject({
      kind: "ssh",
      host: "10.0.0.5",
      port: 22,
      user: "ops",
      privateKeySecret: "opsKey",
    });
  });

  it("defaults: hourly, 300 s spread, persistent, Debian's node_exporter folder, a 900 s bound", () => {
    const c = settingsOf({});
    expect(c).toMatchObject({
      onCalendar: "hourly",
      randomizedDelaySec: 300,
      persistent: true,
      timeoutSec: 900,
      textfileDir: "/var/lib/prometheus/node-exporter",
      stack: "sim",
    });
  });
});

describe("the rendered units", () => {
  it("service: a bounded, idle-priority oneshot running gpuhost drift; no restart, no secret", () => {
    const { service, names } = driftCheckPlan(settingsOf({}));
    expect(names).toEqual({ service: "gpuhost-drift-check-sim.service", timer: "gpuhost-drift-check-sim.timer" });
    const lines = service.split("\n");
    for (const l of [
      "Type=oneshot",
      "User=ops",
      "SuccessExitStatus=1 14 17 18",
      "ExecStart=/usr/bin/node /srv/gpuhost/dist/cli/gpuhost.js drift --stack sim --textfile /var/lib/prometheus/node-exporter",
      "TimeoutStartSec=900",
      "Nice=19",
      "IOSchedulingClass=idle",
      'Environment="PATH=/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"',
    ])
      expect(lines).toContain(l);
    expect(service).not.toMatch(/^Restart=/m);
    expect(service).not.toContain("PASSPHRASE");
  });

  it("service: the CLI's presence checked first, so a missing one fails the unit instead of reading as drift found", () => {
    const { service } = driftCheckPlan(settingsOf({}));
    expect(service.split("\n")).toContain(
      'ExecStartPre=/usr/bin/node -e "try { require.resolve(process.argv[1]) } catch (e) { console.error(e.message); process.exit(2) }" /srv/gpuhost/dist/cli/gpuhost.js',
    );
    expect(service).not.toMatch(/^Bind(ReadOnly)?Paths=/m);
  });

  it("issue 42: a project, node, metrics and state folder under /tmp or /var/tmp are bound into the service past PrivateTmp=yes", async () => {
    const c = settingsOf({
      projectDir: "/tmp/tmp.x1Yz/gpuhost",
      nodePath: "/var/tmp/node-24/bin/node",
      textfileDir: "/tmp/metrics",
      backendUrl: "file:///var/tmp/pulumi-state",
    });
    const { service, timer, names } = driftCheckPlan(c);
    const lines = service.split("\n");
    expect(lines).toContain("PrivateTmp=yes");
    expect(lines.filter((l) => /^Bind(ReadOnly)?Paths=/.test(l))).toEqual([
      "BindPaths=/tmp/tmp.x1Yz/gpuhost",
      "BindReadOnlyPaths=/var/tmp/node-24/bin",
      "BindPaths=/tmp/metrics",
      "BindPaths=/var/tmp/pulumi-state",
    ]);
    const s = await verifyUnit(names.service, service, { with: { [names.timer]: timer } });
    expect(s.stderr).toBe("");
    expect(s.status).toBe(0);
    // only what lies there: a project in /srv, a metrics folder in /var/lib need no bind
    const half = driftCheckPlan(settingsOf({ projectDir: "/tmp/p" })).service;
    expect(half.split("\n").filter((l) => /^Bind(ReadOnly)?Paths=/.test(l))).toEqual(["BindPaths=/tmp/p"]);
  }, 120_000);

  it("a path under /tmp that BindPaths= cannot take is refused in one sentence naming PrivateTmp", () => {
    expect(() => driftCheckPlan(settingsOf({ projectDir: "/tmp/my clone" }))).toThrow(
      /^gpuhost:operations\.driftCheck\.projectDir "\/tmp\/my clone" lies under \/tmp or \/var\/tmp, which the check's service sees only through BindPaths= \(it runs with PrivateTmp=yes\), and BindPaths= takes only paths of letters, digits and \._\+@-\/: move it, or use such a path$/,
    );
    // the same characters outside /tmp need no bind and stay allowed
    expect(() => driftCheckPlan(settingsOf({ projectDir: "/opt/my clone" }))).not.toThrow();
  });

  it("timer: OnCalendar, RandomizedDelaySec, Persistent=true, the service, wanted by timers.target", () => {
    const { timer } = driftCheckPlan(settingsOf({ onCalendar: "*:0/15", randomizedDelaySec: 30 }));
    const lines = timer.split("\n");
    for (const l of [
      "Unit=gpuhost-drift-check-sim.service",
      "OnCalendar=*:0/15",
      "RandomizedDelaySec=30",
      "Persistent=true",
      "WantedBy=timers.target",
    ])
      expect(lines).toContain(l);
    expect(driftCheckPlan(settingsOf({ persistent: false })).timer.split("\n")).toContain("Persistent=false");
  });

  it("the passphrase: a credential read from a root-only file, named only by its path", () => {
    const { service } = driftCheckPlan(settingsOf({ passphraseFile: "/etc/gpuhost/sim.passphrase" }));
    expect(service.split("\n")).toEqual(
      expect.arrayContaining([
        "LoadCredential=pulumi-passphrase:/etc/gpuhost/sim.passphrase",
        "Environment=PULUMI_CONFIG_PASSPHRASE_FILE=%d/pulumi-passphrase",
      ]),
    );
  });

  it("an org/project/stack name gets its own unit names (slashes are not legal there)", () => {
    expect(driftCheckPlan(settingsOf({ stack: "acme/gpu/prod" })).names.timer).toBe(
      "gpuhost-drift-check-acme--gpu--prod.timer",
    );
  });

  it("systemd's own parser reads back paths with spaces, %, $, quotes and backslashes unchanged (systemd-analyze verify)", async () => {
    expect(systemdAnalyzeAvailable()).toBe(true);
    const odd = {
      projectDir: '/opt/my gpuhost/100% "real" $HOME\\x',
      textfileDir: "/var/lib/node exporter/%i",
      nodePath: "/opt/node 24/bin/node",
      backendUrl: "file:///var/lib/pulumi%20state",
      passphraseFile: "/etc/gpuhost/prod.passphrase",
    };
    const c = settingsOf(odd);
    const { service, timer, names } = driftCheckPlan(c);
    const s = await verifyUnit(names.service, service, { with: { [names.timer]: timer } });
    expect(s.stderr).toBe("");
    expect(s.status).toBe(0);
    // systemd keeps `$$` in its dump and turns it into `$` when it runs the program.
    expect(s.argv.map((w) => w.replaceAll("$$", "$"))).toEqual([
      odd.nodePath,
      `${odd.projectDir}/dist/cli/gpuhost.js`,
      "drift",
      "--stack",
      "sim",
      "--textfile",
      odd.textfileDir,
    ]);
    expect(s.environment.join("\n")).toContain(`PULUMI_BACKEND_URL=${odd.backendUrl}`);
    expect(s.environment.join("\n")).toContain("PATH=/opt/node 24/bin:/usr/local/sbin");
    const t = await verifyUnit(names.timer, timer, { with: { [names.service]: service } });
    expect(t.stderr).toBe("");
    expect(t.status).toBe(0);
  }, 120_000);

  it("the default calendar and the documented examples are valid for systemd (systemd-analyze calendar)", async () => {
    for (const expr of [DEFAULT_ON_CALENDAR, "*:0/15", "Mon *-*-* 06:00", "*:*:0/10"]) {
      settingsOf({ onCalendar: expr });
      const r = await run("systemd-analyze", ["calendar", expr], { timeout: 60_000 });
      expect(r.status, `${expr}: ${r.stderr}`).toBe(0);
      expect(r.stdout).toContain("Next elapse:");
    }
    // ...and what systemd refuses is not something the schema's characters alone would catch: proved bad.
    const bad = await run("systemd-analyze", ["calendar", "hourly daily"], { timeout: 60_000 });
    expect(bad.status).not.toBe(0);
  }, 60_000);
});

describe("the sim stack's check, rendered into a simulated host's folder by the real scripts", () => {
  const simHosts = path.join(PROJECT_ROOT, ".gpuhost", "sim-hosts");
  fs.mkdirSync(simHosts, { recursive: true });
  const root = fs.mkdtempSync(path.join(simHosts, "drift-check-"));
  afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

  it("writes both units and enables the timer; a second run changes nothing", async () => {
    const config = parseConfig(stackConfig("sim"));
    const { machine, ...settings } = config.operations.driftCheck!;
    expect(machine).toEqual({ kind: "host", name: "sim-1" });
    const user = (await run("id", ["-un"])).stdout.trim();
    const plan = driftCheckPlan(resolveDriftCheck(settings, { stack: "sim", projectDir: PROJECT_ROOT, user }));
    prepareSimulatedHost(root);
    const conn = simulatedConnection(root);
    const step = async (script: string, args: string[]) => {
      const r = await execOnHost(conn, fs.readFileSync(path.join(PROJECT_ROOT, script), "utf8"), args, {
        timeoutMs: 60_000,
      });
      expect(r.code, r.stderr).toBe(0);
      return r.stdout;
    };
    const install = "components/services/scripts/install-unit.sh";
    const b64 = (s: string) => Buffer.from(s).toString("base64");
    for (const pass of [1, 2]) {
      const changed = [
        await step(install, [plan.names.service, b64(plan.service)]),
        await step(install, [plan.names.timer, b64(plan.timer)]),
      ];
      expect(changed.every((o) => o.includes(`changed=${pass === 1}`))).toBe(true);
    }
    await step(ENABLE_TIMER_SCRIPT, plan.enableArgs);
    const unitDir = path.join(root, "etc/systemd/system");
    expect(fs.readFileSync(path.join(unitDir, plan.names.service), "utf8")).toBe(plan.service);
    expect(fs.readFileSync(path.join(unitDir, plan.names.timer), "utf8")).toBe(plan.timer);
    expect(fs.lstatSync(path.join(unitDir, "timers.target.wants", plan.names.timer)).isSymbolicLink()).toBe(true);
    expect(fs.statSync(path.join(root, "var/lib/prometheus/node-exporter")).isDirectory()).toBe(true);
    // the series GpuhostDriftCheckNeverRan compares against, there before any check ran
    const installed = fs.readFileSync(
      path.join(root, "var/lib/prometheus/node-exporter", "gpuhost-drift-timer@sim.prom"),
      "utf8",
    );
    const at = Number(/^gpuhost_drift_check_installed_timestamp_seconds\{stack="sim"\} (\d+)$/m.exec(installed)?.[1]);
    expect(Math.abs(at - Date.now() / 1000)).toBeLessThan(600);
    expect(fs.readdirSync(path.join(root, "var/lib/prometheus/node-exporter"))).toEqual([
      "gpuhost-drift-timer@sim.prom",
    ]);
    expect((await step("components/services/scripts/remove-unit.sh", [plan.names.timer])).trim()).toBe("changed=true");
    expect(fs.existsSync(path.join(unitDir, "timers.target.wants", plan.names.timer))).toBe(false);
  }, 120_000);
});
