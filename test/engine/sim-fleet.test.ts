/**
 * The fleet under the real engine with the real SMG (PyPI smg, hash-locked): a throwaway copy of
 * stacks/Pulumi.sim-fleet.yaml (three simulated hosts, each on its own free port, the router on the
 * first host's folder) with a secret API key; the third host's simulator starts with the `silent`
 * fault (it accepts connections and never answers, its unit active): its gate never passes. In
 * sequence: `pulumi up` brings up a fleet of two (router.minHealthyHosts 2), the third host left out
 * and named with the gate's diagnosis; the router's key is in no argv, environment, log or plaintext
 * state; with the fault removed, the next `up` gates the third host and the router serves from all
 * three; a further `up` measures nothing again. Then one host's service is stopped while clients
 * send the benchmark's requests through the router: the errors of those sent while it is down stay
 * within the stack's error budget (the streams it was serving when it stopped are cut, and counted
 * apart), SMG stops sending that host requests (its smg_worker_requests_total stops growing while
 * the others' grow), and `gpuhost drift` names the host (its unit and its generation) and the
 * router's worker; the next `up` brings it back into the router, which serves from it again. Last,
 * the router's unit is edited on its machine and the router stopped: `gpuhost drift` names both
 * (FleetVerification probes the machine), and the next `up` restores the unit and starts it.
 * Destroy leaves no router running. Nothing is mocked.
 */
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../engine/pulumi";
import { freeLocalPort as freePort } from "../../ports";
import type { FleetOutputs } from "../../stack/outputs";
import { parse } from "yaml";
import { listWorkers, readRequestCounts } from "../../components/fleet-verification/router-api";
import { fleetTable } from "../../cli/fleet-table";
import { streamChat } from "../../gate/run/stream";
import { makeAgent } from "../../gate/transport/http";
import { parseConfig } from "../../stack/config";
import { createTestStack, onSimulatedHost, type TestStack, upChanges, disposeStack } from "../support/stack";
import { simHostRoot, simFleetSettings } from "../support/sim-stack";
import { smgVenv } from "../support/smg";
import { driftJson } from "../support/engine";

const base = simHostRoot("fleet");
const roots = [1, 2, 3].map((i) => path.join(base, `h${i}`));
const apiKey = `sim-fleet-${randomBytes(16).toString("hex")}`;
const ROUTER_UNIT = "gpuhost-router.service";
let stack: TestStack | undefined;
let metricsUrl = "";

/** The test stack's settings as the program parses them (defaults filled in); the key left out. */
function stackSettings() {
  const file = path.join(stack!.dir, `Pulumi.${stack!.stack}.yaml`);
  const doc = parse(fs.readFileSync(file, "utf8")) as { config: Record<string, unknown> };
  const raw = Object.fromEntries(
    Object.entries(doc.config)
      .filter(([k]) => k.startsWith("gpuhost:") && k !== "gpuhost:apiKey")
      .map(([k, v]) => [k.slice("gpuhost:".length), v]),
  );
  return parseConfig(raw);
}

/** `gpuhost drift --stack <the test stack> --json` through the real refresh (its exit status checked against the report's). */
const driftReport = async () => (await driftJson(stack!.stack, stack!.opts)).report;

/**
 * Clients through the router: `concurrency` loops, each sending the benchmark's streamed request
 * (max_tokens, ignore_eos) with the benchmark's own request function (gate/run/stream.ts):
 * a request fails on an HTTP error, a stream cut without [DONE], or an error event in the stream
 * (SMG ends a stream whose worker died with `data: {"error": ...}` and then [DONE]).
 */
function clientTraffic(url: string, model: string, concurrency: number, maxTokens: number) {
  const results: Array<{ startedAt: number; endedAt: number; error: string | null }> = [];
  const agent = makeAgent(concurrency);
  let running = true;
  const one = async (i: number) => {
    const startedAt = Date.now();
    const sample = await streamChat({
      url: `${url}/v1/chat/completions`,
      body: {
        model,
        messages: [{ role: "user", content: `Write a long story, number ${i}.` }],
        max_tokens: maxTokens,
        ignore_eos: true,
        stream: true,
        stream_options: { include_usage: true },
      },
      apiKey,
      signal: AbortSignal.timeout(120_000),
      dispatcher: agent,
      origin: performance.now(),
    });
    results.push({ startedAt, endedAt: Date.now(), error: sample.error });
  };
  let n = 0;
  const loops = Array.from({ length: concurrency }, async () => {
    while (running) await one(n++);
  });
  return {
    /** Requests begun at or after `t`: how many, how many failed, the first errors. */
    begunSince(t: number) {
      const after = results.filter((r) => r.startedAt >= t);
      const failed = after.filter((r) => r.error !== null);
      return { requests: after.length, errors: failed.length, examples: failed.slice(0, 3).map((r) => r.error) };
    },
    /** Requests begun before `t` and ended after `from`, and how many of them failed. */
    inFlight(from: number, t: number) {
      const those = results.filter((r) => r.startedAt < t && r.endedAt >= from);
      return { requests: those.length, errors: those.filter((r) => r.error !== null).length };
    },
    async stop() {
      running = false;
      await Promise.all(loops);
      await agent.close();
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function fleet(): Promise<FleetOutputs> {
  const f = (await stack!.outputs()).fleet;
  if (!f) throw new Error("the stack exported no fleet");
  return f;
}

beforeAll(async () => {
  // The venv the tests' own router runs from doubles as pip's warm cache for the router's install.
  smgVenv();
  const ports = [await freePort(), await freePort(), await freePort(), await freePort(), await freePort()];
  metricsUrl = `http://127.0.0.1:${ports[4]}/metrics`;
  stack = await createTestStack(
    "sim-fleet",
    [
      ...simFleetSettings(roots, ports, 2),
      { path: "gpuhost:hosts[2].simulatorFaults[0]", value: "silent" },
      // The first up installs the router only once the silent host's gate has waited this out (its
      // critical path); the hosts that answer were ready in 4 to 5 s at a load of 23 on two cores.
      { path: "gpuhost:verification.deadlineSeconds", value: "15" },
      // The second up's refresh asks the silent host for one generation: 10 s, not the default 60.
      { path: "gpuhost:verification.refreshTimeoutSeconds", value: "10" },
      // Three simulators, SMG, the engine and the provider share this machine's two cores with
      // whatever else runs: in a fresh-clone run beside a CPU competitor the provider's event loop
      // stood still 56 to 79 % of every fleet level at 26 % of a core, which the certificate rightly
      // calls "client" (the benchmark process was the limit), and the update then fails with "measured
      // no certified level". This file tests the fleet's gate, outage, drift and repair, not its
      // figures: the certificates are reported here, not required, and each level is still held to
      // its reconciliation below (the published-profile test does the same; the stack's own default,
      // which `GPUHOST_STACK=sim-fleet npm run demo -- --stack` uses, still requires them).
      { path: "gpuhost:benchmark.certification.require", value: "false", type: "bool" },
      // Four ups measure the fleet: its levels and hosts are what this file asserts, not the length of
      // each answer or of the interval's runs, so a quarter of the stack's 1,024-token answers and the
      // fewest runs that still give the sustained figure its interval (router.benchRepeats: 2).
      { path: "gpuhost:benchmark.sweepMaxTokens", value: "256" },
      { path: "gpuhost:router.benchRepeats", value: "2" },
      { path: "gpuhost:apiKey", value: apiKey, secret: true },
    ],
    600_000,
  );
}, 600_000);

afterAll(() => disposeStack(stack, base), 600_000);

describe("sim-fleet under the real engine and the real SMG", () => {
  it("comes up with the two hosts whose gate passed; the third is left out, named with the gate's diagnosis", async () => {
    await upChanges(stack!);
    const f = await fleet();
    expect(f.smgVersion).toContain("1.13.0");
    expect(f.registered.map((w) => w.name)).toEqual(["sim-fleet-1", "sim-fleet-2"]);
    expect(f.leftOut.map((l) => l.name)).toEqual(["sim-fleet-3"]);
    expect(f.leftOut[0].reason).toMatch(/not ready after 15 s|phase "(connect|models)"/);
    expect(f.drift).toEqual([]);
    for (const w of f.registered) expect(w.requests).toBeGreaterThan(0);
    expect(f.sweep.map((l) => l.concurrency)).toEqual([8, 16, 32]);
    // The router keeps no token counts: each fleet level is reconciled with its workers' summed counters.
    for (const level of f.sweep)
      expect(level.certificate?.checks[0], JSON.stringify(level.certificate)).toMatchObject({ ok: true });
    expect(f.plan.hosts).toBe(2);
  }, 900_000);

  it("the router's key is in no argv, no environment, no journal line and not in the state in plaintext; the router holds it", async () => {
    const pid = Number((await onSimulatedHost(roots[0], `systemctl show -p MainPID --value ${ROUTER_UNIT}`)).trim());
    expect(pid).toBeGreaterThan(0);
    expect(fs.readFileSync(`/proc/${pid}/cmdline`, "utf8")).not.toContain(apiKey);
    expect(fs.readFileSync(`/proc/${pid}/environ`, "utf8")).not.toContain(apiKey);
    const ps = (await onSimulatedHost(roots[0], "ps -eo args ww")).split("\n");
    expect(ps.filter((l) => l.includes(apiKey))).toEqual([]);
    expect(await onSimulatedHost(roots[0], `journalctl -u ${ROUTER_UNIT} -n 100000 --no-pager || true`)).not.toContain(
      apiKey,
    );
    const f = await fleet();
    expect((await fetch(`${f.routerEndpoint}/workers`)).status).toBe(401);
    // Nor in the state in plaintext: the key file's stdin and FleetVerification's input are secrets.
    expect((await stack!.ok("stack", "export")).stdout).not.toContain(apiKey);
  });

  it("with the fault removed, the next up gates the third host and the router serves from all three", async () => {
    await stack!.ok("config", "rm", "--path", "gpuhost:hosts[2].simulatorFaults");
    await upChanges(stack!);
    const f = await fleet();
    expect(f.registered.map((w) => w.name)).toEqual(["sim-fleet-1", "sim-fleet-2", "sim-fleet-3"]);
    expect(f.leftOut).toEqual([]);
    expect(f.sustainedOutputTokensPerSecond).toBeGreaterThan(0);
    // Every worker served part of the fleet benchmark, and the shares are SMG's own counts.
    for (const w of f.registered) {
      expect(w.requests).toBeGreaterThan(0);
      expect(w.hostSustainedOutputTokensPerSecond).toBeGreaterThan(0);
    }
    expect(f.registered.reduce((s, w) => s + (w.share ?? 0), 0)).toBeCloseTo(1, 6);
    expect(f.sweep.map((l) => l.concurrency)).toEqual([12, 24, 48]);
    expect(f.scalingEfficiency).toBeCloseTo(
      f.sustainedOutputTokensPerSecond / f.hostsSustainedOutputTokensPerSecond,
      9,
    );
    expect(f.plan.hosts).toBe(3);
    // Each fleet level ran router.benchRepeats times: the sustained figure carries its 95 % interval.
    const runs = stackSettings().router!.benchRepeats;
    expect(f.sustainedInterval).toMatchObject({ runs });
    expect(f.sustainedInterval!.low).toBeLessThanOrEqual(f.sustainedOutputTokensPerSecond);
    expect(f.sustainedInterval!.high).toBeGreaterThanOrEqual(f.sustainedOutputTokensPerSecond);
    console.log(`[sim-fleet] ${fleetTable(f)}`);
  }, 900_000);

  it("a second up with nothing changed re-measures nothing", async () => {
    const { changes, changed } = await upChanges(stack!);
    expect(changed).toEqual([]);
    expect(Object.keys(changes)).toEqual(["same"]);
  }, 600_000);

  it("a host's service stopped: clients through the router keep the error budget, SMG stops sending it requests, gpuhost drift names the host and the router's worker; the next up brings it back", async () => {
    const before = await fleet();
    const settings = stackSettings();
    const budget = settings.benchmark.errorBudget;
    const stopped = before.registered.find((w) => w.name === "sim-fleet-2")!;
    const others = before.registered.filter((w) => w !== stopped).map((w) => w.url);
    // The benchmark's own request shape and lowest level, times the workers.
    const traffic = clientTraffic(
      before.routerEndpoint,
      settings.services.servedModelName ?? "tiny",
      settings.benchmark.concurrency[0] * before.registered.length,
      settings.benchmark.sweepMaxTokens,
    );
    try {
      while (traffic.begunSince(0).requests < 3 * before.registered.length) await sleep(200);
      const stopAt = Date.now();
      await onSimulatedHost(roots[1], "systemctl stop sglang-autoregressive.service");
      // systemctl stop returns once the service's process is gone: from here on the host is down, and
      // what happens to a request is the router's doing. Streams the host was serving when it went
      // are cut (SMG ends them with an error event; a begun stream cannot be retried elsewhere).
      const downAt = Date.now();

      // Within a bound, SMG marks the worker unhealthy in /workers; from then on (and from the
      // moment its counter last grew) it sends the stopped host nothing while the others serve.
      let counts = await readRequestCounts(metricsUrl);
      let lastGrowth = Date.now();
      let unhealthyAt: number | undefined;
      for (const until = Date.now() + 60_000; unhealthyAt === undefined;) {
        if (Date.now() > until)
          throw new Error(`SMG still counted ${stopped.url} healthy 60 s after its service stopped`);
        await sleep(250);
        const now = await readRequestCounts(metricsUrl);
        if ((now[stopped.url] ?? 0) > (counts[stopped.url] ?? 0)) lastGrowth = Date.now();
        counts = now;
        const w = (await listWorkers(before.routerEndpoint, apiKey)).find((x) => x.url === stopped.url);
        if (!w?.isHealthy) unhealthyAt = Date.now();
      }
      const held = await readRequestCounts(metricsUrl);
      const othersServed = (c: Record<string, number>) => others.reduce((s, u) => s + (c[u] ?? 0), 0);
      await sleep(3000);
      const later = await readRequestCounts(metricsUrl);
      expect(later[stopped.url] ?? 0).toBe(held[stopped.url] ?? 0);
      expect(othersServed(later)).toBeGreaterThan(othersServed(held));

      const outage = traffic.begunSince(downAt);
      const cut = traffic.inFlight(stopAt, downAt);
      // Figures for README's Fleet section (printed, never asserted on: timing is the machine's).
      console.log(
        `[sim-fleet outage] ${outage.errors} of ${outage.requests} client requests sent while the host was down failed (budget ${(budget * 100).toFixed(2)} %); ` +
          `${cut.errors} of the ${cut.requests} in flight while it stopped were cut; ` +
          `SMG sent the stopped host its last request ${((lastGrowth - stopAt) / 1000).toFixed(2)} s after the stop began ` +
          `(the stop took ${((downAt - stopAt) / 1000).toFixed(2)} s), and listed it unhealthy after ${((unhealthyAt - stopAt) / 1000).toFixed(2)} s`,
      );
      expect(outage.requests).toBeGreaterThan(0);
      expect(outage.errors, JSON.stringify(outage.examples)).toBeLessThanOrEqual(budget * outage.requests);
      // Only streams in flight can be cut: never more than the clients had open at once.
      expect(cut.errors).toBeLessThanOrEqual(settings.benchmark.concurrency[0] * before.registered.length);
    } finally {
      await traffic.stop();
    }

    const report = await driftReport();
    expect(report.exitCode).toBe(1);
    // The host: its unit is not active (ToolkitState) and it no longer generates (VerifiedGeneration).
    // Its label as ToolkitState describes the simulated connection: the folder relative to the project.
    const host = report.hosts.find((h) => h.host === `local ${path.relative(PROJECT_ROOT, roots[1])}`)!;
    expect(host.status).toBe("drift");
    expect(host.drift).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          field: expect.stringMatching(/^units\..*sglang-autoregressive\.service\.active$/) as string,
        }),
      ]),
    );
    const service = report.services!.find((x) => x.endpoint === stopped.url)!;
    expect(service.drift).toEqual([expect.objectContaining({ field: "generating" })]);
    // The router: the worker the stack registered is no longer healthy there.
    expect(report.fleet).toHaveLength(1);
    expect(report.fleet![0]).toMatchObject({ router: before.routerEndpoint, status: "drift" });
    expect(report.fleet![0].drift).toEqual([
      {
        field: "workers.sim-fleet-2",
        expected: `registered and healthy at ${stopped.url}`,
        found: expect.stringMatching(/ in the router$|^missing from the router$/) as string,
        repair: expect.stringContaining("re-registers the worker") as string,
      },
    ]);
    for (const h of report.hosts.filter((x) => x !== host)) expect(h.status).toBe("clean");

    const { changed } = await upChanges(stack!);
    expect(changed).toEqual(expect.arrayContaining([expect.stringMatching(/fleet-verified$/)]));
    const after = await fleet();
    expect(after.verifiedAt).not.toBe(before.verifiedAt);
    expect(after.registered.map((w) => w.name)).toEqual(["sim-fleet-1", "sim-fleet-2", "sim-fleet-3"]);
    expect(after.registered.find((w) => w.name === "sim-fleet-2")!.requests).toBeGreaterThan(0);
    expect(after.drift).toEqual([]);
    expect((await driftReport()).exitCode).toBe(0);
  }, 900_000);

  it("the router's unit edited on its machine and the router stopped: gpuhost drift names both; the next up restores the unit and the router", async () => {
    await onSimulatedHost(
      roots[0],
      `printf '\\n# edited by hand\\n' >>"$GPUHOST_ROOT/etc/systemd/system/${ROUTER_UNIT}"; systemctl stop ${ROUTER_UNIT}`,
    );
    const report = await driftReport();
    expect(report.exitCode).toBe(1);
    const fields = report.fleet![0].drift.map((d) => d.field);
    expect(fields).toEqual(expect.arrayContaining(["router.unit", "router.active"]));
    expect(report.fleet![0].drift.find((d) => d.field === "router.unit")!.repair).toContain("configure step again");

    const { changed } = await upChanges(stack!);
    expect(changed).toEqual(expect.arrayContaining([expect.stringMatching(/fleet-verified$/)]));
    expect((await onSimulatedHost(roots[0], `systemctl is-active ${ROUTER_UNIT} || true`)).trim()).toBe("active");
    expect(await onSimulatedHost(roots[0], `cat "$GPUHOST_ROOT/etc/systemd/system/${ROUTER_UNIT}"`)).not.toContain(
      "edited by hand",
    );
    expect((await fleet()).drift).toEqual([]);
    expect((await driftReport()).exitCode).toBe(0);
  }, 900_000);
});
