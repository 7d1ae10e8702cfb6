/**
 * The FleetVerification dynamic provider, as plain functions (loaded at call time through
 * components/call-time-provider.ts; tests call them directly).
 *
 * create: enough hosts passed their gate (router.minHealthyHosts), the router's worker list is the
 * stack's and every worker is healthy in /workers, the gate's verify() passes THROUGH the router
 * (a real answer, with its phases and deadline), then the gate's bench() through the router with the
 * host's plan for N workers (gate forWorkers: concurrency and rates times N), judged by the host's
 * verdict (gate verdictOf). A worker the router found dead during the run (its circuit breaker, its
 * health) fails the create, named. The per-worker share comes from SMG's own counters
 * (smg_worker_requests_total) before and after.
 * update: nothing re-measured (a workload change re-plans). read: the router's workers against the
 * stack's list; any difference is drift, and the next `up` re-creates (re-registers, re-measures).
 */
import { randomBytes } from "node:crypto";
import * as GateModule from "../../gate/index";
import type { BenchPlan, VerifyPolicy, Workload } from "../../gate/base/schema";
import { z } from "zod";
import { providerGuard, providerInputs } from "../provider-helpers";
import { SMG_VERSION } from "../router/render";
import type { Drift } from "../drift/schema";
import {
  foundInRouter,
  listWorkers,
  workersLost,
  readRequestCounts,
  reconcileWorkers,
  routerVersion,
  workerDifferences,
} from "./router-api";
import { probeRouterHost, repairRouterHost, type RouterHostCheck } from "./router-host";
import {
  CurvePointSchema,
  measureGroups,
  planGroups,
  replanGroups,
  type MixedFleetOutput,
  type PlannedGroups,
} from "./groups";
import { groupOf } from "../router/schema";
import { RouterGroupsSchema } from "../router/schema";

/**
 * 2: drift entries are structured (components/drift/schema.ts Drift); the sustained level's interval; host time.
 * 3: a mixed fleet (groups) is measured with both classes at once, its outputs under `mixed`.
 * 4: each class of a mixed fleet carries its certificate (certify()) and error rate, judged by the host's
 *    verdict; each group its activeService; `mixed.warnings`. A state of 3 keeps its measurement (no
 *    certificate: said as not gathered) until the next re-measure.
 */
export const PROVIDER_VERSION = "4";

const worker = z.object({ name: z.string(), url: z.string() });

/** FleetVerification's inputs, declared once: check, diff and picking derive from it (provider-helpers.ts). */
export const FleetVerificationInputsSchema = z.object({
  providerVersion: z.string(),
  /** The router as reached from where `pulumi up` runs. */
  router: z.object(
    { url: z.string(), metricsUrl: z.string(), model: z.string() },
    "router must be { url, metricsUrl, model }",
  ),
  apiKey: z.string().optional(),
  routerIdentity: z.string(),
  workers: z.object({
    registered: z.array(worker),
    leftOut: z.array(worker.extend({ reason: z.string() })),
  }),
  /** Each host's own measurement: its sustained tok/s and when it was verified (a re-measure replaces). */
  hostFigures: z.record(
    z.string(),
    z.object({
      sustainedOutputTokensPerSecond: z.number().nullable(),
      verifiedAt: z.string().nullable(),
      /** The host's own sweep (a mixed fleet plans its split from its groups' curves). */
      curve: z.array(CurvePointSchema).nullable().optional(),
      /** The service the host ran when it was measured (a mixed fleet's outputs say what ran, not what was configured). */
      activeService: z.string().nullable().optional(),
    }),
  ),
  /** router.groups: two classes, each on its own group of hosts under its own served name. */
  groups: RouterGroupsSchema.optional(),
  /** Default: every host. */
  minHealthyHosts: z.number().int().positive().optional(),
  verifyPolicy: GateModule.VerifyPolicySchema.optional(),
  benchPlan: GateModule.BenchPlanSchema.optional(),
  /** Runs of each fleet level (router.benchRepeats, at least 2): the sustained figure's interval. */
  benchRepeats: z.number().int().min(2).optional(),
  /**
   * The hosts' seconds per wall second (simulated hosts: the simulator's time scale; absent: 1): the
   * fleet is measured in the same clock as the hosts' own figures it is compared with.
   */
  timeScale: z.number().positive().optional(),
  workload: GateModule.WorkloadSchema.optional(),
  readyDeadlineSeconds: z.number().positive().optional(),
  /** The router's machine, probed on refresh and repaired on create (router-host.ts). */
  routerHost: z
    .custom<RouterHostCheck>((v) => typeof v === "object" && v !== null, "must be the router's machine")
    .optional(),
});
export type FleetVerificationInputs = z.infer<typeof FleetVerificationInputsSchema>;

const INPUTS = providerInputs(FleetVerificationInputsSchema, {
  replaces: ["router", "routerIdentity", "workers", "hostFigures", "benchRepeats", "timeScale", "groups"],
});

/** The fleet's sustained figure's 95 % interval over the runs of its level (gate/judge/goodput.ts). */
export interface SustainedInterval {
  low: number;
  high: number;
  halfWidth: number;
  runs: number;
}

/** The fleet's capacity plan: the job on this fleet, and what the deadline still needs. */
export interface FleetPlan {
  hosts: number;
  totalOutputTokens: number;
  daysForJob: number | null;
  deadlineDays: number;
  hostsForDeadline: number | null;
  hostsMissing: number | null;
}

export function fleetPlan(fleetTokPerSec: number, hosts: number, workload: Workload | undefined): FleetPlan {
  const plan = GateModule.capacity(fleetTokPerSec, workload ?? {});
  const days = plan.daysOnOneHost;
  // Per host as this fleet delivers it (routing overhead and imbalance included), not as alone.
  const hostsForDeadline = days === null ? null : Math.max(1, Math.ceil((hosts * days) / plan.deadlineDays - 1e-9));
  return {
    hosts,
    totalOutputTokens: plan.totalOutputTokens,
    daysForJob: days,
    deadlineDays: plan.deadlineDays,
    hostsForDeadline,
    hostsMissing: hostsForDeadline === null ? null : Math.max(0, hostsForDeadline - hosts),
  };
}

/** The sustained level's throughput interval, or null (no level counts, or a single run). */
export function sustainedInterval(result: {
  sustainedLevel: number | null;
  sweep: Array<{
    level: number;
    throughput: { low: number | null; high: number | null; halfWidth: number | null; n: number };
  }>;
}): SustainedInterval | null {
  const t = result.sweep.find((l) => l.level === result.sustainedLevel)?.throughput;
  if (!t || t.low === null || t.high === null || t.halfWidth === null) return null;
  return { low: t.low, high: t.high, halfWidth: t.halfWidth, runs: t.n };
}

const pickInputs = INPUTS.pick;

export async function check(_olds: Record<string, unknown>, news: Record<string, unknown>) {
  return INPUTS.check(news);
}

export async function diff(_id: string, olds: Record<string, unknown>, news: Record<string, unknown>) {
  // A refresh that found the router's workers differing from the stack's: the next up re-registers and re-measures.
  const extraReplaces = Array.isArray(olds.drift) && olds.drift.length > 0 ? ["drift"] : [];
  return INPUTS.diff(olds, news, { extraReplaces, stables: ["sustainedOutputTokensPerSecond", "scalingEfficiency"] });
}

export async function create(inputs: Record<string, unknown>) {
  const input = INPUTS.decode(inputs);
  const { signal } = providerGuard();
  const say = (line: string) => process.stderr.write(`[FleetVerification ${input.router.url}] ${line}\n`);
  const { registered, leftOut } = input.workers;
  requireEnoughHosts(input, say);
  // The router's machine first (a unit edited or stopped on the host): the worker list lives in its config.
  const repaired = input.routerHost ? await repairRouterHost(input.routerHost, say) : [];
  const registrations = await reconcileWorkers(
    input.router.url,
    registered.map((w) => w.url),
    { apiKey: input.apiKey, deadlineMs: (input.readyDeadlineSeconds ?? 300) * 1000, signal, say },
  );
  // A mixed fleet's split first: a group left with no host fails before any request, saying what it costs.
  const planned = input.groups
    ? planGroups(input.groups, {
        registered,
        leftOut,
        curveOf: (host) => input.hostFigures[host]?.curve,
        workload: input.workload,
      })
    : null;
  // A real answer through the router for every name it serves (a mixed fleet: each group's).
  const started = performance.now();
  for (const model of input.groups
    ? [input.groups.interactive.servedModelName, input.groups.batch.servedModelName]
    : [input.router.model])
    await verifyThrough(input, model, signal, say);
  const readinessSeconds = (performance.now() - started) / 1000;
  const { measured, sent } = await measureThroughRouter(input, planned, signal, say);
  const outs = {
    ...pickInputs(inputs),
    endpoint: input.router.url,
    ...verifiedFleetOutputs(input, measured, sent, { reconciled: [...repaired, ...registrations], readinessSeconds }),
  };
  return { id: `fleet@${input.router.url}#${randomBytes(4).toString("hex")}`, outs };
}

/** Fewer hosts passed their gate than router.minHealthyHosts (default: every host), or none: the fleet is not measured. */
function requireEnoughHosts(input: FleetVerificationInputs, say: Say): void {
  const { registered, leftOut } = input.workers;
  const total = registered.length + leftOut.length;
  const min = input.minHealthyHosts ?? total;
  const why = leftOut.map((l) => `${l.name} (${l.reason})`).join("; ");
  if (registered.length < min || registered.length === 0)
    throw new Error(
      `only ${registered.length} of ${total} hosts passed their gate, fewer than router.minHealthyHosts ${min}${why ? `; left out: ${why}` : ""}`,
    );
  if (leftOut.length) say(`left out: ${why}`);
}

type Sent = FleetVerificationInputs["workers"]["registered"][number] & { requests: number };

/**
 * The fleet measured through the router (a mixed fleet's classes at once, else the host's plan for N
 * workers), with each worker's share of the requests from SMG's own counters before and after. A
 * failed verdict, or a worker the router lost during the run, fails: nothing is published.
 */
async function measureThroughRouter(
  input: FleetVerificationInputs,
  planned: PlannedGroups | null,
  signal: AbortSignal,
  say: Say,
): Promise<{ measured: FleetMeasurement; sent: Sent[] }> {
  const { registered } = input.workers;
  const before = await readRequestCounts(input.router.metricsUrl, signal);
  const measured = planned
    ? await measureMixed(input, planned, signal, say)
    : await measureSweepFleet(input, signal, say);
  if (signal.aborted) throw new Error("the fleet benchmark was interrupted");
  // The router retries a request that failed on one worker on another, so a worker that died during
  // the run may leave no error in the result: the router is asked what it saw of each worker.
  const lost = await workersLost(input.router.url, input.router.metricsUrl, registered, input.apiKey, signal);
  const lostNote = lostNoteOf(input, lost);
  if (measured.failure)
    throw new Error(`the fleet benchmark ${measured.failure}${lostNote ? `; the router lost ${lostNote}` : ""}`);
  // Failing, not publishing N-1: the figure was measured on N workers and then fewer, so it is neither
  // fleet's, and the router's config still lists the worker. The next up re-gates the host.
  if (lost.length > 0)
    throw new Error(
      `the fleet benchmark measured ${registered.length} workers, but during it the router lost ${lostNote}: no figure or plan is published for a fleet that no longer serves; the next up measures again once the host generates (or leaves it out with its gate's diagnosis)`,
    );
  const after = await readRequestCounts(input.router.metricsUrl, signal);
  return { measured, sent: registered.map((w) => ({ ...w, requests: (after[w.url] ?? 0) - (before[w.url] ?? 0) })) };
}

/** What a measured fleet publishes beside its inputs: each worker's share, the figures, the hosts' sum. */
function verifiedFleetOutputs(
  input: FleetVerificationInputs,
  measured: FleetMeasurement,
  sent: Sent[],
  ready: { reconciled: unknown[]; readinessSeconds: number },
) {
  const allSent = sent.reduce((s, w) => s + w.requests, 0);
  const hostFigure = (name: string) => input.hostFigures[name]?.sustainedOutputTokensPerSecond ?? null;
  const hostsSum = input.workers.registered.reduce((s, w) => s + (hostFigure(w.name) ?? 0), 0);
  const { failure: _, ...figures } = measured;
  return {
    registered: sent.map((w) => ({
      name: w.name,
      url: w.url,
      requests: w.requests,
      share: allSent > 0 ? w.requests / allSent : null,
      hostSustainedOutputTokensPerSecond: hostFigure(w.name),
    })),
    leftOut: input.workers.leftOut,
    ...ready,
    ...figures,
    hostsSustainedOutputTokensPerSecond: hostsSum,
    // Every rate kept up with (healthy, no capacity figure), or a mixed fleet (its classes' load is
    // not its capacity): no efficiency.
    scalingEfficiency: hostsSum > 0 && measured.capacity ? measured.sustainedOutputTokensPerSecond / hostsSum : null,
    drift: [] as Drift[],
    verifiedAt: new Date().toISOString(),
  };
}

type Say = (line: string) => void;

/** The workers the router lost, by name, address and why; a mixed fleet's with its group (whose class lost it). */
function lostNoteOf(input: FleetVerificationInputs, lost: Array<{ name: string; url: string; why: string }>): string {
  return lost
    .map((l) => {
      const g = groupOf(input.groups, l.name);
      return `${l.name} (${g ? `the ${g} group's host, ` : ""}${l.url}: ${l.why})`;
    })
    .join("; ");
}

/** What either measurement of the fleet publishes, and the failure that stops it from publishing. */
interface FleetMeasurement {
  failure: string | null;
  capacity: boolean;
  sweep: Array<Record<string, unknown>>;
  saturationConcurrency: number | null;
  saturated: boolean;
  sustainedOutputTokensPerSecond: number;
  sustainedInterval: SustainedInterval | null;
  plan: FleetPlan;
  mixed: MixedFleetOutput | null;
}

/** The gate's verify() through the router for MODEL; throws when the fleet does not answer. */
async function verifyThrough(input: FleetVerificationInputs, model: string, signal: AbortSignal, say: Say) {
  const endpoint = { url: input.router.url, model, apiKey: input.apiKey };
  const readiness = await GateModule.verify(endpoint, input.verifyPolicy ?? {}, {
    signal,
    onPhase: (phase: string, detail: string) => say(`${phase}: ${detail}`),
  });
  if (!readiness.ready)
    throw new Error(
      `through the router${input.groups ? ` (${model})` : ""}: ${readiness.diagnosis ?? "the readiness gate failed"}`,
    );
  say(`${model} answered through the router after ${readiness.elapsedSeconds.toFixed(1)} s`);
}

/** One fleet serving one model: the host's plan for N workers through the router, the host's verdict. */
async function measureSweepFleet(
  input: FleetVerificationInputs,
  signal: AbortSignal,
  say: Say,
): Promise<FleetMeasurement> {
  const gate = GateModule;
  const { registered } = input.workers;
  const urls = registered.map((w) => w.url);
  const endpoint = { url: input.router.url, model: input.router.model, apiKey: input.apiKey };
  // The host's plan, as N workers run it (concurrency and rates scaled): never a translation of our own.
  const plan = gate.forWorkers(input.benchPlan, registered.length, { minRepeats: input.benchRepeats ?? 2 });
  const levels = plan.rate ? `${plan.rate.join(", ")} req/s offered` : `concurrency ${plan.concurrency.join(", ")}`;
  say(`benchmarking ${registered.length} workers at ${levels}, ${plan.repeats} runs each`);
  const result = await gate.bench(endpoint, plan, {
    signal,
    timeScale: input.timeScale ?? 1,
    // The router keeps no token counts: the fleet's levels are reconciled with its workers' counters.
    readCounters: (model: string, s: AbortSignal) => gate.fleetCounters(urls, model, input.apiKey, s),
    onProgress: (e) => {
      if (e.kind === "level")
        say(
          `${gate.levelName(e.summary)}: ${e.summary.outputTokensPerSecond.toFixed(1)} tok/s, ${e.summary.errors} errors`,
        );
    },
  });
  // The host's verdict, word for word (gate/judge/verdict.ts).
  const verdict = gate.verdictOf(result);
  const fleet = result.sustainedOutputTokensPerSecond;
  return {
    failure: verdict.ok ? null : verdict.failure,
    capacity: verdict.ok && verdict.capacity,
    sweep: result.sweep.map((l) => ({
      concurrency: l.concurrency,
      offeredRequestsPerSecond: l.offeredRequestsPerSecond,
      outputTokensPerSecond: l.outputTokensPerSecond,
      requests: l.requests,
      errors: l.errors,
      // Reconciled with the workers' summed counters (gate.fleetCounters).
      certificate: l.certificate,
    })),
    saturationConcurrency: result.saturationConcurrency,
    saturated: result.saturated,
    sustainedOutputTokensPerSecond: fleet,
    sustainedInterval: sustainedInterval(result),
    plan: fleetPlan(fleet, registered.length, input.workload),
    mixed: null,
  };
}

/**
 * A mixed fleet: each class's name answers through the router, then both classes at once
 * (groups.ts), judged by the host's verdict (gate mixedVerdictOf) with the stack's error budget and
 * certification. The fleet's figure is the two classes' tok/s in the window; its plan is the batch
 * job on the batch group.
 */
async function measureMixed(
  input: FleetVerificationInputs,
  planned: PlannedGroups,
  signal: AbortSignal,
  say: Say,
): Promise<FleetMeasurement> {
  const bench = GateModule.BenchPlanSchema.parse(input.benchPlan ?? {});
  const { groups } = planned;
  const { mixed, failure } = await measureGroups(planned, {
    say,
    plan: bench,
    activeServiceOf: (host) => input.hostFigures[host]?.activeService,
    run: (classes) => {
      say(
        `both classes at once through the router: ${classes.interactive.concurrency} interactive users on ${groups.interactive.servedModelName}, ${classes.batch.concurrency} batch requests in flight on ${groups.batch.servedModelName}`,
      );
      return GateModule.runMixedTraffic({
        url: input.router.url,
        apiKey: input.apiKey,
        // The request shape of the hosts' own sweeps, whose curves predict the fleet.
        interactive: { ...classes.interactive, maxTokens: bench.sweepMaxTokens },
        batch: { ...classes.batch, maxTokens: bench.sweepMaxTokens },
        workers: classes.workers,
        timeScale: input.timeScale ?? 1,
        requestTimeoutSeconds: bench.requestTimeoutSeconds,
        judgement: {
          errorBudget: bench.errorBudget,
          slo: bench.slo,
          rateShortfall: bench.rateShortfall,
          certification: bench.certification,
        },
        signal,
      });
    },
  });
  say(mixed.verdict);
  const batchHosts = mixed.batch.workers.length;
  return {
    failure,
    capacity: false,
    sweep: [],
    saturationConcurrency: null,
    saturated: false,
    sustainedOutputTokensPerSecond:
      mixed.interactive.measured.outputTokensPerSecond + mixed.batch.measured.outputTokensPerSecond,
    sustainedInterval: null,
    plan: fleetPlan(mixed.batch.measured.outputTokensPerSecond, batchHosts, input.workload),
    mixed,
  };
}

/** Nothing that defines the fleet changed: keep the measurement, re-plan for the workload. */
export async function update(_id: string, olds: Record<string, unknown>, news: Record<string, unknown>) {
  const measured = INPUTS.measured(olds);
  const { workload, groups, workers } = INPUTS.decode(news, ["workload", "groups", "workers"]);
  const mixed = olds.mixed as MixedFleetOutput | null | undefined;
  if (mixed && groups) {
    const replanned = replanGroups(mixed, groups, workload);
    return {
      outs: {
        ...measured,
        ...pickInputs(news),
        mixed: replanned,
        plan: fleetPlan(mixed.batch.measured.outputTokensPerSecond, mixed.batch.workers.length, workload),
      },
    };
  }
  const fleet = Number(olds.sustainedOutputTokensPerSecond);
  const hosts = workers.registered.length;
  return {
    outs: {
      ...measured,
      ...pickInputs(news),
      plan: fleetPlan(Number.isFinite(fleet) ? fleet : 0, hosts, workload),
    },
  };
}

/**
 * Refresh: the router's workers against the stack's list (missing, unhealthy or Failed, unknown),
 * its version against the pin, or the router not answering: each one Drift entry (what was
 * expected, what was found, how to repair), as ToolkitState's are, so `gpuhost drift` names them.
 */
export async function read(id: string, props: Record<string, unknown>) {
  const input = INPUTS.decode(props, ["router", "apiKey", "workers", "groups", "routerHost"]);
  // The router's machine too (a unit edited or stopped there): the HTTP API cannot tell that.
  const machine = input.routerHost
    ? await probeRouterHost(input.routerHost).catch((e: Error): Drift[] => [
        {
          field: "router.machine",
          expected: "probed",
          found: `could not be probed: ${e.message}`,
          repair: "check the router's machine is reachable with the stack's connection, then gpuhost drift again",
        },
      ])
    : [];
  return { id, props: { ...props, drift: [...(await routerDrift(input)), ...machine] }, inputs: pickInputs(props) };
}

const REPAIR_WORKER =
  "pulumi up: FleetVerification re-registers the worker (after the host's own gate passed again, where it failed) and re-measures the fleet";

export async function routerDrift(
  input: Pick<FleetVerificationInputs, "router" | "apiKey" | "workers" | "groups">,
): Promise<Drift[]> {
  const { router, apiKey, workers } = input;
  // A mixed fleet's worker is named with its group: groups.interactive.workers.<host>.
  const field = (name: string) => {
    const g = groupOf(input.groups, name);
    return g ? `groups.${g}.workers.${name}` : `workers.${name}`;
  };
  try {
    const actual = await listWorkers(router.url, apiKey);
    const drift: Drift[] = workerDifferences(
      workers.registered.map((w) => w.url),
      actual,
    ).map((d) => {
      const name = workers.registered.find((w) => w.url === d.url)?.name;
      return d.kind === "unknown"
        ? {
            field: `workers.${d.url}`,
            expected: "absent (not one of the stack's workers)",
            found: foundInRouter(d),
            repair: "pulumi up: FleetVerification removes it from the router and re-measures the fleet",
          }
        : {
            field: name ? field(name) : `workers.${d.url}`,
            expected: `registered and healthy at ${d.url}`,
            found: foundInRouter(d),
            repair: REPAIR_WORKER,
          };
    });
    const version = await routerVersion(router.url, apiKey);
    if (version !== undefined && !version.includes(SMG_VERSION))
      drift.push({
        field: "router.version",
        expected: `smg ${SMG_VERSION}`,
        found: version,
        repair:
          "pulumi up: FleetVerification runs the Router's install step again (smg reinstalled hash-locked) and restarts the router",
      });
    return drift;
  } catch (e) {
    return [
      {
        field: "router",
        expected: `answering at ${router.url}`,
        found: `unreachable: ${(e as Error).message}`,
        repair:
          "systemctl restart gpuhost-router.service on the router's machine (journalctl -u gpuhost-router.service says why it stopped), then pulumi up re-verifies the fleet",
      },
    ];
  }
}

export async function deleteResource(): Promise<void> {
  // A record of what was measured; the router itself is the Router component's.
}

export const provider = { check, diff, create, update, read, delete: deleteResource };
export type { BenchPlan, VerifyPolicy };
