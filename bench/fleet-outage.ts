/**
 * A host of the fleet stops: how many client requests through the real SMG fail, how soon SMG stops
 * sending the stopped host requests (its smg_worker_requests_total stops growing) and how soon its
 * /workers lists it unhealthy (what `gpuhost drift` reads). The sim-fleet stack's shape: three
 * simulated hosts (its profile and time scale), its router policy and health checks rendered by
 * routerLaunchConfig (or, with --smg-defaults, none: SMG's own), clients at the benchmark's first
 * level times the workers sending its request (sweepMaxTokens, streamed, through the benchmark's own
 * request function, which counts an error event inside a 200 stream as a failure). One host's server is
 * closed mid-traffic (its connections cut, its port refusing, as `systemctl stop` leaves it).
 *
 *   npx tsx bench/fleet-outage.ts [--runs 3] [--smg-defaults] [--horizon 30]
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { parseArgs } from "node:util";
import { parse } from "yaml";
import { listWorkers, readRequestCounts } from "../components/fleet-verification/router-api";
import { routerLaunchConfig } from "../components/router/render";
import { percentile } from "../gate/judge/stats";
import { streamChat } from "../gate/run/stream";
import { makeAgent } from "../gate/transport/http";
import { projectRoot } from "../project-files";
import { startSimulator } from "../simulator/index";
import { parseConfig } from "../stack/config";
import { smgVenv, startRouter, waitForHealthyWorkers } from "../test/support/smg";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function simFleet() {
  const doc = parse(fs.readFileSync(path.join(projectRoot(), "stacks", "Pulumi.sim-fleet.yaml"), "utf8")) as {
    config: Record<string, unknown>;
  };
  const raw = Object.fromEntries(
    Object.entries(doc.config)
      .filter(([k]) => k.startsWith("gpuhost:"))
      .map(([k, v]) => [k.slice("gpuhost:".length), v]),
  );
  return parseConfig(raw);
}

interface Outage {
  /** Requests begun while the host was down, and how many failed. */
  requests: number;
  errors: number;
  /** Requests in flight while it stopped, and how many were cut. */
  inFlight: number;
  cut: number;
  lastRoutedSeconds: number;
  unhealthySeconds: number | null;
}

async function once(venv: string, smgDefaults: boolean, horizonSeconds: number): Promise<Outage> {
  const c = simFleet();
  const model = c.services.servedModelName ?? "tiny";
  const sims = await Promise.all(
    [0, 1, 2].map(() =>
      startSimulator({
        profile: c.simulator.profile,
        timeScale: c.simulator.timeScale,
        port: 0,
        servedModelName: model,
        log: () => undefined,
      }),
    ),
  );
  const health = Object.fromEntries(
    Object.entries(routerLaunchConfig(c.router!, [])).filter(([k]) => k.startsWith("health-")),
  );
  const router = await startRouter({
    venv,
    workerUrls: sims.map((s) => s.url),
    policy: c.router!.policy,
    extraConfig: smgDefaults ? {} : health,
  });
  const results: Array<{ startedAt: number; endedAt: number; ok: boolean }> = [];
  const agent = makeAgent(c.benchmark.concurrency[0] * sims.length);
  let running = true;
  try {
    await waitForHealthyWorkers(router.url, 3);
    // The benchmark's own request function: an error event inside a 200 stream is a failure.
    const one = async (i: number) => {
      const startedAt = Date.now();
      const sample = await streamChat({
        url: `${router.url}/v1/chat/completions`,
        body: {
          model,
          messages: [{ role: "user", content: `Write a long story, number ${i}.` }],
          max_tokens: c.benchmark.sweepMaxTokens,
          ignore_eos: true,
          stream: true,
          stream_options: { include_usage: true },
        },
        signal: AbortSignal.timeout(120_000),
        dispatcher: agent,
        origin: performance.now(),
      });
      results.push({ startedAt, endedAt: Date.now(), ok: sample.error === null });
    };
    let n = 0;
    const loops = Array.from({ length: c.benchmark.concurrency[0] * sims.length }, async () => {
      while (running) await one(n++);
    });
    while (results.length < 9) await sleep(100);
    const stopped = sims[1].url;
    const stopAt = Date.now();
    await sims[1].close();
    // Down from here: a request begun later fails only if the router sends it to the dead host.
    const downAt = Date.now();
    let last = (await readRequestCounts(router.metricsUrl))[stopped] ?? 0;
    let lastGrowth = stopAt;
    let unhealthyAt: number | null = null;
    while (Date.now() - stopAt < horizonSeconds * 1000) {
      await sleep(250);
      const now = (await readRequestCounts(router.metricsUrl))[stopped] ?? 0;
      if (now > last) [last, lastGrowth] = [now, Date.now()];
      const w = (await listWorkers(router.url)).find((x) => x.url === stopped);
      if (unhealthyAt === null && !w?.isHealthy) unhealthyAt = Date.now();
      if (unhealthyAt !== null && Date.now() - Math.max(unhealthyAt, lastGrowth) > 3000) break;
    }
    running = false;
    await Promise.all(loops);
    const outage = results.filter((r) => r.startedAt >= downAt);
    const inFlight = results.filter((r) => r.startedAt < downAt && r.endedAt >= stopAt);
    return {
      requests: outage.length,
      errors: outage.filter((r) => !r.ok).length,
      inFlight: inFlight.length,
      cut: inFlight.filter((r) => !r.ok).length,
      lastRoutedSeconds: (lastGrowth - stopAt) / 1000,
      unhealthySeconds: unhealthyAt === null ? null : (unhealthyAt - stopAt) / 1000,
    };
  } finally {
    running = false;
    await agent.close();
    await router.stop();
    await Promise.all(sims.map((s) => s.close()));
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      runs: { type: "string", default: "3" },
      "smg-defaults": { type: "boolean", default: false },
      horizon: { type: "string", default: "30" },
    },
  });
  const runs = Number(values.runs);
  const horizon = Number(values.horizon);
  const venv = smgVenv();
  const c = simFleet();
  console.log(
    `fleet outage: 3 simulated hosts (${c.simulator.profile}, time scale ${c.simulator.timeScale}) behind SMG, ` +
      `${c.benchmark.concurrency[0] * 3} clients x ${c.benchmark.sweepMaxTokens} tokens; health checks: ` +
      (values["smg-defaults"] ? "SMG's defaults" : `the sim-fleet stack's (${JSON.stringify(c.router!.healthCheck)})`) +
      `; one host's server closed mid-traffic; ${runs} run(s), horizon ${horizon} s`,
  );
  const all: Outage[] = [];
  for (let i = 0; i < runs; i++) {
    const o = await once(venv, values["smg-defaults"], horizon);
    all.push(o);
    console.log(
      `run ${i + 1}: ${o.errors} of ${o.requests} client requests sent while the host was down failed, ${o.cut} of ${o.inFlight} in flight while it stopped were cut; last request routed to the stopped host ` +
        `${o.lastRoutedSeconds.toFixed(2)} s after the stop; listed unhealthy ` +
        (o.unhealthySeconds === null ? `not within ${horizon} s` : `after ${o.unhealthySeconds.toFixed(2)} s`),
    );
  }
  const routed = all.map((o) => o.lastRoutedSeconds).sort((a, b) => a - b);
  const failed = all.reduce((s, o) => s + o.errors, 0);
  const sent = all.reduce((s, o) => s + o.requests, 0);
  const cut = all.reduce((s, o) => s + o.cut, 0);
  console.log(
    `overall: ${failed} of ${sent} requests sent while the host was down failed (${((100 * failed) / Math.max(1, sent)).toFixed(2)} %); ` +
      `${cut} streams cut by the stops; routing stopped after median ${(percentile(routed, 50) ?? 0).toFixed(2)} s (max ${Math.max(...routed).toFixed(2)} s)`,
  );
}

void main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
