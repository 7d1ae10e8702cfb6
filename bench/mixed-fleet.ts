/**
 * A mixed fleet measured through the real router (issue 29.3), against homogeneous fleets of the
 * same size measured the same way, beside the plan's prediction:
 *
 * 1. each service's curve on one simulated host of the story's profiles (autoregressive, EAGLE-3),
 *    measured by the comparison's sweep (measureSweep);
 * 2. the split from those curves (mixed-plan.ts): the interactive group's service and hosts, the
 *    batch group's, and the homogeneous fleets;
 * 3. the mixed fleet brought up as simulators behind the real SMG (PyPI smg, the tests' hash-locked
 *    venv), the interactive group serving `kimi-k2.6-interactive`, the batch group `kimi-k2.6`; both
 *    classes sent at once (mixed-run.ts); then the same hosts, all autoregressive and all EAGLE-3,
 *    with the same split and the same traffic.
 *
 *   npm run tsx -- bench/mixed-fleet.ts [--time-scale 10] [--users 16] [--ttft 3] [--itl 0.02]
 *       [--completions 190000] [--tokens 1024] [--deadline-days 1] [--requests-per-user 12]
 *       [--policy round_robin] [--requests-per-level 1] [--json FILE]
 *
 * The interactive run is the window both classes are measured in: requests per user long enough
 * that batch requests (a minute or more of host time each at 64 per host) finish inside it. The
 * router's policy is round_robin by default: the plan assumes a class's hosts share its load
 * evenly, and cache_aware keeps a prompt on one host. Figures are the simulated hosts' own time
 * (host seconds); the simulators run in this process, so a stall of it is X times longer in host time.
 */
import * as fs from "node:fs";
import { parseArgs } from "node:util";
import { certificateText, measureSweep, runMixedTraffic, type MixedTrafficResult } from "../gate/index";
import {
  configuredPlan,
  degradedPlan,
  meetsObjective,
  mixedPlan,
  neededTokensPerSecond,
  type ServiceCurve,
} from "../gate/plan/mixed-plan";
import { WorkloadShapeSchema } from "../gate/base/workload";
import { fetchOnce } from "../gate/transport/http";
import { DEFAULT_JUDGEMENT } from "../gate/judge/levels";
import { startSimulator, type RunningSimulator } from "../simulator/index";
import { QUICK_ROUTER, smgVenv, startRouter, waitForHealthyWorkers } from "../test/support/smg";

const PROFILES = {
  autoregressive: "kimi-k2.6-8x-rtx-pro-6000",
  eagle3: "kimi-k2.6-8x-rtx-pro-6000-eagle3",
} as const;
type Service = keyof typeof PROFILES;
const LEVELS = [1, 2, 4, 8, 16, 32, 64];
const INTERACTIVE = "kimi-k2.6-interactive";
const BATCH = "kimi-k2.6";

const { values } = parseArgs({
  options: {
    "time-scale": { type: "string", default: "10" },
    "requests-per-user": { type: "string", default: "12" },
    // Requests per slot of each curve level: 1 measures TTFT with a level's requests arriving together
    // at an idle host; more measure it with requests arriving while the host decodes, as in a fleet.
    "requests-per-level": { type: "string", default: "1" },
    policy: { type: "string", default: "round_robin" },
    users: { type: "string", default: "16" },
    ttft: { type: "string", default: "3" },
    itl: { type: "string", default: "0.02" },
    completions: { type: "string", default: "190000" },
    tokens: { type: "string", default: "1024" },
    "deadline-days": { type: "string", default: "1" },
    json: { type: "string" },
  },
});
const timeScale = Number(values["time-scale"]);
const tokens = Number(values.tokens);
const demand = {
  interactive: { users: Number(values.users), ttftP95Seconds: Number(values.ttft), itlP95Seconds: Number(values.itl) },
  batch: {
    completions: Number(values.completions),
    outputTokensPerCompletion: tokens,
    deadlineDays: Number(values["deadline-days"]),
  },
};
const needed = neededTokensPerSecond(demand.batch);

async function sim(service: Service, servedModelName: string): Promise<RunningSimulator> {
  return startSimulator({ profile: PROFILES[service], servedModelName, port: 0, timeScale, log: () => undefined });
}

/** Ready within the profile's longest load (630 host seconds) in wall time, with room. */
async function waitReady(url: string): Promise<void> {
  for (const until = Date.now() + (700 / timeScale + 60) * 1000; Date.now() < until;) {
    try {
      if ((await fetchOnce(`${url}/health_generate`, { timeoutMs: 2000 })).status === 200) return;
    } catch {
      // loading
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} never became ready`);
}

/** One service's curve on one host: the comparison's sweep. */
async function curve(service: Service): Promise<ServiceCurve> {
  const s = await sim(service, BATCH);
  try {
    await waitReady(s.url);
    const m = await measureSweep({ url: s.url }, BATCH, {
      mode: "closed",
      requests: {
        kind: "shape",
        shape: WorkloadShapeSchema.parse({ outputTokens: { distribution: "fixed", tokens } }),
      },
      levels: LEVELS,
      requestsPerLevel: Number(values["requests-per-level"]),
      repeats: 1,
      requestTimeoutSeconds: 3600,
      timeScale,
      judgement: DEFAULT_JUDGEMENT,
    });
    return {
      service,
      sweep: m.sweep.map((l) => ({
        level: l.concurrency ?? 0,
        outputTokensPerSecond: l.outputTokensPerSecond,
        ttftP95Seconds: l.ttftP95Seconds,
        itlPerTokenP95Seconds: l.itlPerTokenP95Seconds,
        errors: l.errors,
        withinErrorBudget: l.withinErrorBudget,
      })),
    };
  } finally {
    await s.close();
  }
}

/** A fleet of `interactive` hosts serving the interactive name and `batch` hosts the batch name, both classes at once. */
async function measureFleet(
  interactive: { service: Service; hosts: number },
  batch: { service: Service; hosts: number; perHostConcurrency: number },
): Promise<MixedTrafficResult> {
  const hosts = [
    ...(await Promise.all(Array.from({ length: interactive.hosts }, () => sim(interactive.service, INTERACTIVE)))),
    ...(await Promise.all(Array.from({ length: batch.hosts }, () => sim(batch.service, BATCH)))),
  ];
  const router = await startRouter({
    venv: smgVenv(),
    workerUrls: hosts.map((h) => h.url),
    policy: values.policy,
    extraConfig: QUICK_ROUTER,
  });
  try {
    await Promise.all(hosts.map((h) => waitReady(h.url)));
    await waitForHealthyWorkers(router.url, hosts.length);
    return await runMixedTraffic({
      url: router.url,
      interactive: {
        model: INTERACTIVE,
        concurrency: demand.interactive.users,
        maxTokens: tokens,
        requestsPerUser: Number(values["requests-per-user"]),
      },
      batch: { model: BATCH, concurrency: batch.hosts * batch.perHostConcurrency, maxTokens: tokens },
      workers: {
        interactive: hosts.slice(0, interactive.hosts).map((h) => h.url),
        batch: hosts.slice(interactive.hosts).map((h) => h.url),
      },
      timeScale,
      requestTimeoutSeconds: 3600,
      judgement: DEFAULT_JUDGEMENT,
    });
  } finally {
    await router.stop();
    await Promise.all(hosts.map((h) => h.close()));
  }
}

const ms = (v: number | null) => (v === null ? "n/a" : `${(v * 1000).toFixed(1)} ms`);
const s1 = (v: number | null) => (v === null ? "n/a" : `${v.toFixed(2)} s`);
const tok = (v: number) => Math.round(v).toLocaleString("en-US");
const pct = (measured: number | null, predicted: number | null) =>
  measured === null || predicted === null || predicted === 0
    ? "n/a"
    : `${(((measured - predicted) / predicted) * 100).toFixed(0)} %`;

async function main(): Promise<void> {
  const curves = [await curve("autoregressive"), await curve("eagle3")];
  const plan = mixedPlan(curves, demand.interactive, demand.batch);
  console.log(
    `demand: ${demand.interactive.users} users within TTFT p95 <= ${demand.interactive.ttftP95Seconds} s and ITL p95 <= ${demand.interactive.itlP95Seconds * 1000} ms/token; ${tok(demand.batch.completions)} completions x ${tokens} tokens in ${demand.batch.deadlineDays} day(s) (${tok(needed)} tok/s)`,
  );
  console.log(plan.verdict);
  if (!plan.interactive || !plan.batch) throw new Error("the plan found no mixed fleet for this demand");
  const split = { interactive: plan.interactive.hosts, batch: plan.batch.hosts };
  const fleets: { name: string; i: Service; b: Service }[] = [
    { name: "mixed (the plan)", i: plan.interactive.service as Service, b: plan.batch.service as Service },
    { name: "all autoregressive", i: "autoregressive", b: "autoregressive" },
    { name: "all EAGLE-3", i: "eagle3", b: "eagle3" },
  ];
  const rows = [];
  for (const f of fleets) {
    const perHost = plan.batch.perHostConcurrency;
    const r = await measureFleet(
      { service: f.i, hosts: split.interactive },
      { service: f.b, hosts: split.batch, perHostConcurrency: perHost },
    );
    // The stack's own prediction of these groups (components/fleet-verification/groups.ts does the same).
    const configured = configuredPlan(
      curves,
      {
        interactive: { service: f.i, hosts: split.interactive },
        batch: { service: f.b, hosts: split.batch, perHostConcurrency: perHost },
      },
      demand.interactive.users,
    );
    const p = degradedPlan(curves, configured, demand.interactive, demand.batch, { interactive: 0, batch: 0 });
    const predicted = {
      ttftP95Seconds: p.interactive?.ttftP95Seconds ?? null,
      itlPerTokenP95Seconds: p.interactive?.itlPerTokenP95Seconds ?? null,
      batchTokensPerSecond: p.batch?.tokensPerSecond ?? null,
    };
    const meetsInteractive =
      r.interactive.level.withinErrorBudget &&
      meetsObjective(r.interactive.ttftP95Seconds, r.interactive.itlPerTokenP95Seconds, demand.interactive);
    const meetsBatch = r.batch.level.withinErrorBudget && r.batch.outputTokensPerSecond >= needed;
    rows.push({ fleet: f, measured: r, predicted, meetsInteractive, meetsBatch });
    console.log(
      [
        `${f.name}: ${split.interactive} ${f.i} (interactive) + ${split.batch} ${f.b} (batch)`,
        `  interactive: TTFT p95 ${s1(r.interactive.ttftP95Seconds)} (plan ${s1(predicted.ttftP95Seconds)}, ${pct(r.interactive.ttftP95Seconds, predicted.ttftP95Seconds)}), ITL p95 ${ms(r.interactive.itlPerTokenP95Seconds)}/token (plan ${ms(predicted.itlPerTokenP95Seconds)}, ${pct(r.interactive.itlPerTokenP95Seconds, predicted.itlPerTokenP95Seconds)}), ${r.interactive.errors} errors: objective ${meetsInteractive ? "met" : "MISSED"}; ${certificateText(r.interactive.level.certificate)}`,
        `  batch: ${tok(r.batch.outputTokensPerSecond)} tok/s (plan ${predicted.batchTokensPerSecond === null ? "n/a" : tok(predicted.batchTokensPerSecond)}, ${pct(r.batch.outputTokensPerSecond, predicted.batchTokensPerSecond)}), needs ${tok(needed)}: deadline ${meetsBatch ? "met" : "MISSED"}; ${certificateText(r.batch.level.certificate)}`,
        `  served: ${JSON.stringify({ interactive: r.interactive.servedBy, batch: r.batch.servedBy })}`,
      ].join("\n"),
    );
  }
  if (values.json) fs.writeFileSync(values.json, JSON.stringify({ demand, curves, plan, rows }, null, 2));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
