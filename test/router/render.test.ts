// The router's files as rendered (pure): the unit checked by systemd's own parser, the launcher's
// config (no key), worker URLs as the router reaches them, which hosts become workers, and the
// `router` config section's refusals.
import { describe, expect, it } from "vitest";
import { hostConfig, parseConfig } from "../../stack/config";
import { fleetWorkers } from "../../components/router/router";
import { renderRouterUnit, ROUTER_UNIT, routerIdentity, routerLaunchConfig } from "../../components/router/render";
import { RouterSchema } from "../../components/router/schema";
import { stackConfig } from "../config/stacks";
import { systemdAnalyzeAvailable, verifyUnit } from "../services/systemd-analyze";
import { urlSeenFrom } from "../../components/services/endpoint";

const router = RouterSchema.parse({ host: "a" });

describe("gpuhost-router.service", () => {
  it.each([true, false])(
    "verifies with systemd-analyze, no warning (api key %s)",
    async (apiKey) => {
      expect(systemdAnalyzeAvailable()).toBe(true);
      const unit = renderRouterUnit(router, { apiKey });
      const r = await verifyUnit(ROUTER_UNIT, unit);
      expect(r.stderr).toBe("");
      expect(r.status).toBe(0);
      expect(r.argv).toEqual([
        "/opt/gpuhost-router/venv/bin/python",
        "/opt/gpuhost-router/launcher.py",
        "/etc/gpuhost-router/router.json",
      ]);
      expect(unit.includes("LoadCredential=router-api-key:/etc/gpuhost/router-api-key.yaml")).toBe(apiKey);
    },
    60_000,
  );

  it("is hardened: a throw-away user, no privilege, no devices, a read-only system", () => {
    const unit = renderRouterUnit(router, { apiKey: true });
    for (const line of [
      "DynamicUser=yes",
      "NoNewPrivileges=yes",
      "ProtectSystem=strict",
      "PrivateDevices=yes",
      "CapabilityBoundingSet=",
      "SystemCallFilter=@system-service",
    ])
      expect(unit).toContain(`\n${line}\n`);
    expect(unit).not.toContain("--api-key");
    expect(unit).not.toMatch(/^Environment=/m);
  });
});

describe("the launcher's config", () => {
  it("holds the workers sorted, the policy and the metrics port, and never a key", () => {
    const c = routerLaunchConfig(router, ["http://127.0.0.1:2", "http://127.0.0.1:1"]);
    expect(c["worker-urls"]).toEqual(["http://127.0.0.1:1", "http://127.0.0.1:2"]);
    expect(c).toMatchObject({ policy: "cache_aware", port: 30100, "prometheus-port": 29000, host: "127.0.0.1" });
    expect(Object.keys(c).some((k) => k.includes("key"))).toBe(false);
  });

  it("renders the health checks: defaults for a real host (a probe outlasts SGLang's 20 s /health), the stack's own values", () => {
    expect(routerLaunchConfig(router, [])).toMatchObject({
      "health-check-interval-secs": 15,
      "health-check-timeout-secs": 25,
      "health-failure-threshold": 3,
      "health-success-threshold": 2,
    });
    const fast = RouterSchema.parse({ host: "a", healthCheck: { intervalSeconds: 1, timeoutSeconds: 1 } });
    expect(routerLaunchConfig(fast, [])).toMatchObject({
      "health-check-interval-secs": 1,
      "health-check-timeout-secs": 1,
      "health-failure-threshold": 3,
    });
    expect(routerIdentity("u", routerLaunchConfig(fast, []))).not.toBe(
      routerIdentity("u", routerLaunchConfig(router, [])),
    );
  });

  it("changes the router's identity when the workers change, not when their order does", () => {
    const unit = renderRouterUnit(router, { apiKey: false });
    const id = (urls: string[]) => routerIdentity(unit, routerLaunchConfig(router, urls));
    expect(id(["http://h:1", "http://h:2"])).toBe(id(["http://h:2", "http://h:1"]));
    expect(id(["http://h:1"])).not.toBe(id(["http://h:1", "http://h:2"]));
  });
});

describe("workers", () => {
  const sim = (name: string) => ({ name, connection: { kind: "simulated" } });
  const ssh = (name: string, host: string) => ({ name, connection: { kind: "ssh", host } });
  it("are reached on loopback on the router's machine, at their address over SSH", () => {
    expect(urlSeenFrom(sim("r"), sim("w"), "127.0.0.1", 31412)).toBe("http://127.0.0.1:31412");
    expect(urlSeenFrom(ssh("r", "10.0.0.1"), ssh("r", "10.0.0.1"), "127.0.0.1", 30000)).toBe("http://127.0.0.1:30000");
    expect(urlSeenFrom(ssh("r", "10.0.0.1"), ssh("w", "10.0.0.2"), "127.0.0.1", 30000)).toBe("http://10.0.0.2:30000");
    expect(urlSeenFrom(sim("r"), ssh("w", "fd00::2"), "127.0.0.1", 30000)).toBe("http://[fd00::2]:30000");
  });

  it("are exactly the hosts whose gate passed; the others are named with their reason", () => {
    expect(
      fleetWorkers([
        { name: "a", url: "http://a", generating: true },
        { name: "b", url: "http://b", generating: false, failure: "stuck at models" },
        { name: "c", url: "http://c" },
      ]),
    ).toEqual({
      registered: [{ name: "a", url: "http://a" }],
      leftOut: [
        { name: "b", url: "http://b", reason: "stuck at models" },
        { name: "c", url: "http://c", reason: "its readiness gate did not pass in this update" },
      ],
    });
  });
});

describe("config `router`", () => {
  const base = () => stackConfig("sim-fleet");
  const issues = (raw: Record<string, unknown>) => {
    try {
      parseConfig(raw);
      return [];
    } catch (e) {
      return (e as { issues: Array<{ path: string; message: string }> }).issues.map((i) => `${i.path}: ${i.message}`);
    }
  };
  it("the sim-fleet stack parses, with the defaults filled in", () => {
    const c = parseConfig(base());
    expect(c.router).toMatchObject({
      host: "sim-fleet-1",
      policy: "cache_aware",
      venvPath: "/opt/gpuhost-router/venv",
    });
    expect(c.router?.minHealthyHosts).toBeUndefined();
  });
  it("refuses a router on no host, a minimum above the hosts, an unknown key, a shared port", () => {
    const raw = base();
    const r = raw.router as Record<string, unknown>;
    expect(issues({ ...raw, router: { ...r, host: "nope" } })).toEqual([
      expect.stringMatching(/^gpuhost:router\.host: names no host \(hosts: sim-fleet-1, sim-fleet-2, sim-fleet-3\)$/),
    ]);
    expect(issues({ ...raw, router: { ...r, minHealthyHosts: 4 } })).toEqual([
      "gpuhost:router.minHealthyHosts: is 4, but the stack has 3 host(s)",
    ]);
    expect(issues({ ...raw, router: { ...r, policy: "fastest" } })[0]).toMatch(/^gpuhost:router\.policy: /);
    expect(issues({ ...raw, router: { ...r, apiKey: "x" } })).toEqual(["gpuhost:router.apiKey: unknown key"]);
    expect(issues({ ...raw, router: { ...r, healthCheck: { intervalSeconds: 0 } } })[0]).toMatch(
      /^gpuhost:router\.healthCheck\.intervalSeconds: /,
    );
    expect(issues({ ...raw, router: { ...r, healthCheck: { every: 1 } } })).toEqual([
      "gpuhost:router.healthCheck.every: unknown key",
    ]);
    expect(issues({ ...raw, router: { ...r, benchRepeats: 1 } })[0]).toMatch(/^gpuhost:router\.benchRepeats: /);
    const hosts = (raw.hosts as Array<Record<string, unknown>>).map((h) => ({ ...h, port: 31411 }));
    expect(issues({ ...raw, hosts })).toEqual([
      "gpuhost:hosts[1].port: port 31411 is also host 'sim-fleet-1's, on the same machine: give each its own hosts[].port",
      "gpuhost:hosts[2].port: port 31411 is also host 'sim-fleet-1's, on the same machine: give each its own hosts[].port",
    ]);
  });
  it("router.groups (sim-mixed): each host runs its group's service under its group's name; every host in one group, each name its own", () => {
    const raw = stackConfig("sim-mixed");
    const c = parseConfig(raw);
    const of = (name: string) =>
      hostConfig(
        c,
        c.hosts.find((h) => h.name === name)!,
      ).services;
    expect(of("sim-mixed-1")).toMatchObject({
      active: "eagle3",
      servedModelName: "kimi-k2.6-interactive",
      port: 31421,
    });
    expect(of("sim-mixed-4")).toMatchObject({ active: "autoregressive", servedModelName: "kimi-k2.6", port: 31424 });
    expect(c.router?.groups?.interactive.requestsPerUser).toBe(4);
    const r = raw.router as { groups: { interactive: Record<string, unknown>; batch: Record<string, unknown> } };
    const with_ = (groups: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      issues({ ...raw, ...extra, router: { ...r, groups: { ...r.groups, ...groups } } });
    expect(with_({ batch: { ...r.groups.batch, hosts: ["sim-mixed-3"] } })).toEqual([
      "gpuhost:hosts[3]: host 'sim-mixed-4' is in no group of router.groups",
    ]);
    expect(
      with_({ batch: { ...r.groups.batch, hosts: ["sim-mixed-2", "sim-mixed-3", "sim-mixed-4", "gpu-9"] } }),
    ).toEqual([
      "gpuhost:router.groups.batch.hosts[0]: host 'sim-mixed-2' is also in the interactive group: a host serves one class",
      "gpuhost:router.groups.batch.hosts[3]: names no host (hosts: sim-mixed-1, sim-mixed-2, sim-mixed-3, sim-mixed-4)",
    ]);
    expect(with_({ batch: { ...r.groups.batch, servedModelName: "kimi-k2.6-interactive" } })).toEqual([
      "gpuhost:router.groups.batch.servedModelName: is the interactive group's too: SMG routes each class by its name, so the two must differ",
    ]);
    expect(with_({ batch: { ...r.groups.batch, service: "dflash" } })).toEqual([
      "gpuhost:router.groups.batch.service: is dflash, but services.dflash is not set",
    ]);
    expect(with_({}, { benchmark: { ...(raw.benchmark as object), rate: [1, 2] } })).toEqual([
      "gpuhost:benchmark.rate: is an open loop, but a mixed fleet is planned from the hosts' concurrency curves (users per host): use benchmark.concurrency",
    ]);
    expect(with_({}, { services: { ...(raw.services as object), compare: true } })).toEqual([
      "gpuhost:services.compare: comparing services on the hosts of a mixed fleet would switch the groups' services: the groups name each host's service (measure the curves with gpuhost compare on one host)",
    ]);
    expect(with_({ interactive: { ...r.groups.interactive, users: 0, sla: 1 } }).sort()).toEqual([
      "gpuhost:router.groups.interactive.sla: unknown key",
      "gpuhost:router.groups.interactive.users: Too small: expected number to be >=1",
    ]);
  });

  it("refuses a router on an SSH host bound to loopback: FleetVerification could not reach it", () => {
    const raw = {
      hosts: [{ name: "r", connection: { kind: "ssh", host: "10.0.0.1" } }],
      router: { host: "r" },
    };
    expect(issues(raw)).toEqual([
      "gpuhost:router.bind: is loopback, but the router runs on SSH host 'r': FleetVerification reaches it from where `pulumi up` runs, so bind 0.0.0.0 (with apiKey)",
    ]);
  });

  it("takes per-host simulator faults on simulated hosts only", () => {
    const raw = base();
    const hosts = raw.hosts as Array<Record<string, unknown>>;
    expect(
      parseConfig({ ...raw, hosts: [...hosts.slice(0, 2), { ...hosts[2], simulatorFaults: ["silent"] }] }).hosts[2],
    ).toMatchObject({
      simulatorFaults: ["silent"],
    });
    const local = { name: "l", connection: { kind: "local" }, simulatorFaults: ["silent"] };
    expect(issues({ hosts: [local] })).toEqual([
      "gpuhost:hosts[0].simulatorFaults: is for simulated hosts only; host 'l' is local",
    ]);
    expect(issues({ ...raw, hosts: [{ ...hosts[0], simulatorFaults: ["nope"] }, ...hosts.slice(1)] })[0]).toMatch(
      /^gpuhost:hosts\[0\]\.simulatorFaults\[0\]: /,
    );
  });

  it("refuses a router beyond loopback without an API key", () => {
    const raw = base();
    expect(issues({ ...raw, router: { ...(raw.router as object), bind: "0.0.0.0" } })).toEqual([
      "gpuhost:apiKey: router.bind 0.0.0.0 exposes the fleet beyond loopback: set an API key (pulumi config set --secret apiKey ...)",
    ]);
  });
});
