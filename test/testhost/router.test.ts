/**
 * gpuhost-router.service under REAL systemd (issue 21): the Router component's own steps
 * (components/router/steps.ts, the values the component hands to hostScript) run over SSH through
 * the host layer the component's providers use (components/host/exec.ts execOnHost: the same
 * rendered invocation as hostScript), on the Debian test host booted with systemd-nspawn.
 *
 *   - install-router.sh installs the real smg 1.13.0 from the package index, pip --require-hashes
 *     against components/router/requirements.txt (egress.ts: the host trusts what this machine trusts);
 *   - the rendered unit passes `systemd-analyze verify` on the host; it starts and stays active with
 *     DynamicUser and every hardening line of the template in effect (`systemctl show` for each
 *     directive, and the kernel's view of the main process: no privilege, seccomp, no capability);
 *   - `systemd-analyze security` gives its exposure figure (printed; bounded here);
 *   - the key (router-api-key credential) is in no argv, environment or journal line of the host;
 *     the router enforces it (401 without, 200 with);
 *   - a chat completion goes through the router to a worker (the project's simulator on this
 *     machine's loopback, requiring the same key: the router sends it);
 *   - `systemctl restart` brings the router back with the workers of its config (the stack's list),
 *     not with a worker added to its memory at run time;
 *   - remove-router.sh (the component's delete) and remove-api-key-file.sh leave nothing running.
 */
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SshConnection } from "../../components/host/connection";
import { execOnHost, type ExecResult } from "../../components/host/exec";
import {
  ROUTER_KEY_CREDENTIAL,
  ROUTER_KEY_FILE,
  ROUTER_UNIT,
  routerHome,
  SMG_VERSION,
} from "../../components/router/render";
import { RouterSchema } from "../../components/router/schema";
import { configureStep, installStep, keyFileStdin, keyFileStep, type RouterStep } from "../../components/router/steps";
import { keyedHash } from "../../components/services/stamp-key";
import { freeLocalPort } from "../../ports";
import { projectRoot } from "../../project-files";
import { startSimulator, type RunningSimulator } from "../../simulator/index";
import { shareEgressTrust } from "./egress";
import { bootTestHost, connectionOf, requireTestHost, type TestHost } from "./harness";

const enabled = requireTestHost();
/** Bound on one host step; the first install downloads smg's wheels (about 20 MB). */
const STEP = 300_000;
const KEY = `sk-router-${randomBytes(16).toString("hex")}`;
const STAMP_KEY = randomBytes(32).toString("hex");
/** The template's hardening lines (after ExecStart's block), each checked against `systemctl show`. */
const TEMPLATE = fs.readFileSync(
  path.join(projectRoot(), "components/router/units/gpuhost-router.service.tmpl"),
  "utf8",
);

/** `systemctl show`'s spelling of a directive's value where it differs from the unit file's. */
function shownAs(directive: string, value: string, shown: string): boolean {
  const words = (s: string) => s.split(/\s+/).filter(Boolean).sort().join(" ");
  switch (directive) {
    case "RestrictAddressFamilies":
      return words(value) === words(shown);
    case "SystemCallFilter":
      // The set expanded to syscall names; @system-service has no reboot or kexec_load.
      return shown.includes("openat") && !/\breboot\b/.test(shown) && !/\bkexec_load\b/.test(shown);
    case "SystemCallArchitectures":
      return value === "native" ? shown === "native" || shown === "x86-64" : shown === value;
    case "UMask":
      return Number.parseInt(shown, 8) === Number.parseInt(value, 8);
    default:
      return shown === value;
  }
}

describe.runIf(enabled)("gpuhost-router.service under real systemd on the Debian test host", () => {
  let host: TestHost;
  let conn: SshConnection;
  const sims: RunningSimulator[] = [];
  let extra: RunningSimulator;
  let router: ReturnType<typeof RouterSchema.parse>;
  let url = "";
  const timings: Record<string, number> = {};
  const auth = { Authorization: `Bearer ${KEY}` };
  const sh = (cmd: string) => host.execOk(cmd).then((r) => r.stdout.trim());

  /** A Router step as the component runs it: its script file, its arguments, the key on stdin. */
  const runStep = async (step: RouterStep, stdin?: string, del = false): Promise<ExecResult> => {
    const script = del ? step.deleteScript! : step.script;
    const text = fs.readFileSync(path.join(projectRoot(), script), "utf8");
    return execOnHost(conn, text, del ? (step.deleteArgs ?? []) : step.args, {
      scriptName: path.basename(script),
      timeoutMs: STEP,
      stdin,
    });
  };
  const ok = (r: ExecResult) => {
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
    return r.stdout;
  };
  const configure = (urls: string[]) =>
    configureStep(router, urls, { apiKey: true, keyHash: keyedHash(STAMP_KEY, KEY) });
  const mainPid = async () => Number(await sh(`systemctl show -p MainPID --value ${ROUTER_UNIT}`));
  const workers = async () =>
    (
      (await (await fetch(`${url}/workers`, { headers: auth, signal: AbortSignal.timeout(5000) })).json()) as {
        workers: Array<{ url: string; is_healthy: boolean }>;
      }
    ).workers;
  /** Bounded wait until the router lists exactly `urls`, all healthy. */
  const waitForWorkers = async (urls: string[], boundMs = 120_000) => {
    const until = Date.now() + boundMs;
    let last: unknown;
    while (Date.now() < until) {
      try {
        const w = await workers();
        last = w;
        if (
          JSON.stringify(w.map((x) => x.url).sort()) === JSON.stringify([...urls].sort()) &&
          w.every((x) => x.is_healthy)
        )
          return;
      } catch (e) {
        last = String(e);
      }
      await new Promise((r) => setTimeout(r, 500));
    }
    throw new Error(`the router did not list ${urls.join(", ")} healthy within ${boundMs} ms: ${JSON.stringify(last)}`);
  };
  const chat = (headers: Record<string, string>) =>
    fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify({ model: "tiny", messages: [{ role: "user", content: "hello" }], max_tokens: 8 }),
      signal: AbortSignal.timeout(60_000),
    });
  /** Completion tokens each worker has served (the simulator's own counter). */
  const served = async () =>
    Promise.all(
      sims.map(async (s) => {
        const text = await (await fetch(`${s.url}/metrics`, { headers: auth })).text();
        return Number(/^sglang:generation_tokens_total(?:\{[^}]*\})? (\S+)/m.exec(text)?.[1] ?? Number.NaN);
      }),
    );

  beforeAll(async () => {
    const quiet = { log: () => undefined };
    for (let i = 0; i < 2; i++)
      sims.push(await startSimulator({ profile: "tiny", port: 0, timeScale: 20, apiKey: KEY, ...quiet }));
    extra = await startSimulator({ profile: "tiny", port: 0, timeScale: 20, apiKey: KEY, ...quiet });
    router = RouterSchema.parse({ host: "th", port: await freeLocalPort(), prometheusPort: await freeLocalPort() });
    url = `http://127.0.0.1:${router.port}`;
    let t = Date.now();
    host = await bootTestHost({ name: "router" });
    timings.bootSeconds = (Date.now() - t) / 1000;
    conn = connectionOf(host);
    await shareEgressTrust(host);
    t = Date.now();
    ok(await runStep(installStep(router)));
    timings.installSeconds = (Date.now() - t) / 1000;
  }, 15 * 60_000);

  afterAll(async () => {
    console.log(`[router testhost] ${JSON.stringify(timings)}`);
    await host?.stop();
    await Promise.all([...sims, extra].filter(Boolean).map((s) => s.close()));
  }, 120_000);

  it(
    "install-router.sh installed the pinned smg from requirements.txt with --require-hashes; again changes nothing",
    async () => {
      expect(await sh(`${router.venvPath}/bin/smg --version`)).toContain(SMG_VERSION);
      expect(await sh(`${router.venvPath}/bin/pip freeze --all`)).toMatch(new RegExp(`^smg==${SMG_VERSION}$`, "m"));
      const again = ok(await runStep(installStep(router)));
      expect(again).toContain(`smgVersion=smg ${SMG_VERSION}`);
      expect(again).toContain("changed=false");
    },
    STEP,
  );

  it(
    "configure-router.sh: the unit passes systemd-analyze verify on the host and starts",
    async () => {
      ok(await runStep(keyFileStep(), keyFileStdin(KEY)));
      expect(await sh(`stat -c '%a %U' ${ROUTER_KEY_FILE}`)).toBe("600 root");
      const out = ok(await runStep(configure(sims.map((s) => s.url))));
      expect(out).toContain("restarted=true");
      const verify = await host.exec(`systemd-analyze verify /etc/systemd/system/${ROUTER_UNIT}`);
      expect(verify.stdout + verify.stderr).toBe("");
      expect(verify.code).toBe(0);
      await waitForWorkers(sims.map((s) => s.url));
      // The router's process listens on its port, as the host's ss sees it (the removal test's control).
      expect(await sh(`ss -ltnpH '( sport = :${router.port} )'`)).toMatch(/users:\(\("smg::router"|users:\(\("python/);
    },
    STEP,
  );

  it("stays active with DynamicUser and every hardening line of the template in effect", async () => {
    const pid = await mainPid();
    expect(pid).toBeGreaterThan(0);
    // Still the same process a while later: not crash-looping under the sandbox.
    await new Promise((r) => setTimeout(r, 3000));
    expect(await sh(`systemctl is-active ${ROUTER_UNIT}`)).toBe("active");
    expect(await mainPid()).toBe(pid);
    expect(await sh(`systemctl show -p NRestarts --value ${ROUTER_UNIT}`)).toBe("0");

    const directives = TEMPLATE.slice(TEMPLATE.indexOf("NoNewPrivileges="), TEMPLATE.indexOf("[Install]"))
      .split("\n")
      .filter((l) => /^[A-Z]\w+=/.test(l))
      .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)] as const);
    expect(directives.length).toBeGreaterThanOrEqual(20);
    const shown = await sh(
      `systemctl show ${directives.map(([d]) => `-p ${d}`).join(" ")} -p DynamicUser -p User ${ROUTER_UNIT}`,
    );
    const props = new Map(shown.split("\n").map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]));
    expect(props.get("DynamicUser")).toBe("yes");
    const notInEffect = directives.filter(([d, v]) => !shownAs(d, v, props.get(d) ?? "<missing>"));
    expect(
      notInEffect.map(([d, v]) => `${d}=${v} shown as ${props.get(d)}`),
      shown,
    ).toEqual([]);

    // The kernel's view of the main process.
    const status = await sh(`cat /proc/${pid}/status`);
    const field = (name: string) => new RegExp(`^${name}:\\s*(.*)$`, "m").exec(status)?.[1]?.trim();
    const uid = Number(field("Uid")?.split(/\s+/)[0]);
    // systemd's dynamic users: 61184-65519
    expect(uid).toBeGreaterThanOrEqual(61184);
    expect(uid).toBeLessThanOrEqual(65519);
    expect(field("NoNewPrivs")).toBe("1");
    expect(field("Seccomp")).toBe("2");
    for (const cap of ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"])
      expect(BigInt(`0x${field(cap)}`), cap).toBe(0n);
    // Its own mount namespace (ProtectSystem, PrivateTmp, PrivateDevices, ...), not PID 1's.
    expect(await sh(`readlink /proc/${pid}/ns/mnt`)).not.toBe(await sh("readlink /proc/1/ns/mnt"));
    const journal = await sh(`journalctl -u ${ROUTER_UNIT} --no-pager -o cat`);
    expect(journal).not.toMatch(/Failed to set up|Operation not permitted|status=2\d\d\//);
  }, 60_000);

  it("the device ACL (DevicePolicy=closed from PrivateDevices=, DeviceAllow=char-rtc r from ProtectClock=) is enforced wherever the host's cgroups let systemd enforce it", async () => {
    const props = await sh(`systemctl show -p DevicePolicy -p DeviceAllow ${ROUTER_UNIT}`);
    expect(props).toContain("DevicePolicy=closed");
    expect(props).toContain("DeviceAllow=char-rtc r");
    // systemd enforces it with a BPF program on cgroup v2, or the v1 devices controller when it may
    // write there. nspawn on a machine booted with cgroup v1 gives the container that controller
    // read-only: systemd then cannot apply the ACL (PrivateDevices='s own minimal, read-only /dev
    // still applies, and the service has no CAP_MKNOD to make a node).
    const v2 = (await sh("stat -fc %T /sys/fs/cgroup")) === "cgroup2fs";
    const v1Writable = (await host.exec("test -w /sys/fs/cgroup/devices/devices.allow")).code === 0;
    // A transient unit with the router's device lines opens tty0 (a device neither line allows),
    // made by root in the host's /dev: "Operation not permitted" only when the ACL is enforced.
    await sh("rm -f /dev/gpuhost-probe-tty0 && mknod -m 0666 /dev/gpuhost-probe-tty0 c 4 0");
    const probe = await host.exec(
      "systemd-run --wait --pipe --quiet -p DevicePolicy=closed -p 'DeviceAllow=char-rtc r' " +
        "sh -c 'exec 3</dev/gpuhost-probe-tty0 && echo opened' 2>&1; rm -f /dev/gpuhost-probe-tty0",
    );
    const enforced = /Operation not permitted/.test(probe.stdout + probe.stderr);
    // The probe ran: the open was refused by the ACL, or it succeeded.
    expect(enforced || probe.stdout.includes("opened"), probe.stdout + probe.stderr).toBe(true);
    timings.deviceAclEnforced = enforced ? 1 : 0;
    console.log(
      `[router testhost] device ACL enforced: ${enforced} (cgroup v2: ${v2}, v1 devices controller writable: ${v1Writable}); probe: ${(probe.stdout + probe.stderr).trim()}`,
    );
    expect(enforced, "the device ACL is not enforced although this host's cgroups would let systemd enforce it").toBe(
      v2 || v1Writable,
    );
  }, 60_000);

  it("systemd-analyze security gives the unit's exposure figure", async () => {
    const r = await host.exec(`systemd-analyze security --no-pager ${ROUTER_UNIT}`);
    const m = /Overall exposure level for \S+: (\d+(?:\.\d+)?) (\S+)/.exec(r.stdout);
    expect(m, r.stdout + r.stderr).not.toBeNull();
    timings.exposure = Number(m![1]);
    console.log(`[router testhost] systemd-analyze security: ${m![1]} ${m![2]}\n${r.stdout}`);
    // systemd rates below 2.0 as OK; the unit was written to stay there.
    expect(Number(m![1])).toBeLessThan(2);
  }, 60_000);

  it("the key is in no argv, environment or journal line; the router enforces it", async () => {
    const argv = await sh("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done");
    // smg renames its process (setproctitle): the router is there under its own title. Its argv as
    // started is the unit's ExecStart, which names the config file and nothing else.
    expect(argv).toContain("smg::router");
    expect(await sh(`systemctl show -p ExecStart --value ${ROUTER_UNIT}`)).toContain(
      `argv[]=${router.venvPath}/bin/python ${routerHome(router.venvPath)}/launcher.py /etc/gpuhost-router/router.json ;`,
    );
    expect(argv).not.toContain(KEY);
    expect(await sh("for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ 2>/dev/null; done")).not.toContain(KEY);
    expect(await sh("journalctl --no-pager -o cat")).not.toContain(KEY);
    // The unit hands the launcher no environment of its own (no Environment=, no EnvironmentFile=):
    // the key is the service's credential, a copy readable by its dynamic user only. (smg's
    // setproctitle reuses the main process's argv and environ memory, so /proc/PID/environ of the
    // router is blank once it runs: the key was never there, the launcher reads the credential file.)
    expect(await sh(`systemctl show -p Environment -p EnvironmentFiles --value ${ROUTER_UNIT}`)).toBe("");
    const pid = await mainPid();
    const uid = await sh(`stat -c %u /proc/${pid}`);
    expect(await sh(`stat -c '%a %u' /run/credentials/${ROUTER_UNIT}/${ROUTER_KEY_CREDENTIAL}`)).toBe(`400 ${uid}`);

    expect((await chat({})).status).toBe(401);
    expect((await chat({ Authorization: "Bearer not-the-key" })).status).toBe(401);
    expect((await fetch(`${url}/workers`)).status).toBe(401);
  }, 120_000);

  it("a chat completion goes through the router to a worker, which gets the key from the router", async () => {
    const before = await served();
    const r = await chat(auth);
    expect(r.status).toBe(200);
    const body = (await r.json()) as { usage: { completion_tokens: number } };
    expect(body.usage.completion_tokens).toBe(8);
    const after = await served();
    // The workers require the key: one of them served the 8 tokens, so the router sent it.
    expect(after.reduce((a, b) => a + b, 0) - before.reduce((a, b) => a + b, 0)).toBe(8);
  }, 120_000);

  it(
    "configure again with the same workers and key: no restart; systemctl restart comes back with the config's workers only",
    async () => {
      const pid = await mainPid();
      expect(ok(await runStep(configure(sims.map((s) => s.url))))).toContain("restarted=false");
      expect(await mainPid()).toBe(pid);

      // A worker added to the router's memory at run time (not in the stack's list) ...
      const added = await fetch(`${url}/workers`, {
        method: "POST",
        headers: { "content-type": "application/json", ...auth },
        body: JSON.stringify({ url: extra.url }),
      });
      expect(added.status, await added.text()).toBeLessThan(300);
      await waitForWorkers([...sims.map((s) => s.url), extra.url]);
      // ... is forgotten by a restart, which comes back with the workers of its config.
      await sh(`systemctl restart ${ROUTER_UNIT}`);
      expect(await mainPid()).not.toBe(pid);
      await waitForWorkers(sims.map((s) => s.url));
      expect((await chat(auth)).status).toBe(200);
    },
    STEP,
  );

  it(
    "remove-router.sh and remove-api-key-file.sh (the component's delete) leave nothing running",
    async () => {
      const step = configure(sims.map((s) => s.url));
      ok(await runStep(step, undefined, true));
      ok(await runStep(keyFileStep(), undefined, true));
      expect((await host.exec(`systemctl is-active ${ROUTER_UNIT}`)).stdout.trim()).not.toBe("active");
      expect(await sh(`systemctl list-units --all --no-legend ${ROUTER_UNIT} | wc -l`)).toBe("0");
      // (bracketed, so the pattern does not match the shell that runs pgrep)
      expect(await sh(`pgrep -af '[l]auncher.py|[s]mg::router' || true`)).toBe("");
      // no process of a dynamic user (61184-65519) is left
      expect(await sh("ps -e -o uid=,pid=,args= | awk '$1 >= 61184 && $1 <= 65519'")).toBe("");
      expect(await sh(`ls /etc/systemd/system/${ROUTER_UNIT} ${ROUTER_KEY_FILE} 2>/dev/null || true`)).toBe("");
      // No process of the host listens on the router's ports. (Asked on the host: its ss resolves
      // only the container's processes, while this shared machine's loopback may hand a freed port
      // to another suite's server at any moment, which a plain connect would count.)
      const ports = `( sport = :${router.port} or sport = :${router.prometheusPort} )`;
      expect(await sh(`ss -ltnpH '${ports}' | grep users: || true`)).toBe("");
    },
    STEP,
  );
});
