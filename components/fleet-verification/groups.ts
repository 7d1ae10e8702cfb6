/**
 * A mixed fleet's measurement (router.groups, issue 29): each class reaches its group through SMG's
 * model registry (the group's served name), both classes are sent at once through the router
 * (gate/run/mixed-run.ts), each comes back with its certificate from the one certify(), and
 * the one verdict (gate mixedVerdictOf) judges them with the stack's benchmark.errorBudget and
 * certification.require, as one host is judged; beside it, every token of a name must have been
 * generated on its own group's hosts (a router that ignored the name fails here, named). Beside the
 * measurement, the prediction from the hosts' own measured curves (each group's first registered
 * host's sweep): the configured split as mixed-plan.ts judges it with the left-out hosts out of their
 * groups (what the fleet can still promise), and the fewest hosts that would do, beside the
 * homogeneous fleets. A failed verdict or routing fails the create; missing an objective or the
 * deadline does not (the fleet serves, and the outputs say by how much it misses).
 */
import { z } from "zod";
import * as GateModule from "../../gate/index";
import type { Workload } from "../../gate/base/schema";
import {
  configuredPlan,
  CurvesSchema,
  daysForJob,
  degradedPlan,
  meetsObjective,
  mixedPlan,
  neededTokensPerSecond,
  type HostsDown,
  type BatchDemand,
  type DegradedPlan,
  type InteractiveDemand,
  type MixedPlan,
  type ServiceCurve,
} from "../../gate/plan/mixed-plan";
import type { ClassResult, MixedTrafficResult } from "../../gate/run/mixed-run";
import type { VerdictInput } from "../../gate/judge/verdict";
import { GROUP_NAMES, type GroupName, type RouterGroups } from "../router/schema";

/** One point of a host's own sweep, as the split reads it. */
export const CurvePointSchema = CurvesSchema.shape.services.element.shape.sweep.element;

const seconds = (what: string) => z.number().nullable().describe(`${what}, host seconds; null: none measured`);

/** What one group measured through the router in the mixed window. */
const GroupMeasuredSchema = z.object({
  concurrency: z.number().describe("Requests in flight at once: the interactive users, or the batch slots"),
  requests: z.number().describe("Requests counted (the batch's: those with tokens inside the window)"),
  errors: z.number().describe("Failed requests, over the whole run"),
  errorRate: z.number().describe("Failed over sent"),
  withinErrorBudget: z.boolean().describe("The error rate within benchmark.errorBudget"),
  errorExamples: z.array(z.string()).describe("The first few distinct errors"),
  outputTokensPerSecond: z.number().describe("Output tokens per host second within the window"),
  ttftP95Seconds: seconds("Time to first token, p95"),
  itlPerTokenP95Seconds: seconds("Inter-token latency per token, p95: (e2e - TTFT) / (tokens - 1)"),
  certificate: GateModule.CertificateSchema.nullable().describe(
    "The class's certificate from the one certify(): its tokens against its group's counters by its served name, its slots applied, the client, the counters steady",
  ),
  servedBy: z.record(z.string(), z.number()).describe("Tokens of the class's name each worker generated (host name)"),
});
export type GroupMeasured = z.infer<typeof GroupMeasuredSchema>;

const GroupOutputSchema = z.object({
  service: z.string().describe("The service the group is configured with"),
  activeService: z
    .string()
    .nullable()
    .describe(
      "The service its hosts ran when measured (their activeService; several: comma-separated); null: not known",
    ),
  model: z.string().describe("The served name its class asks for"),
  workers: z.array(z.string()).describe("Its hosts that passed their gate: the router's workers for its name"),
  leftOut: z.array(z.string()).describe("Its hosts left out (their gate failed)"),
  measured: GroupMeasuredSchema,
  meets: z.boolean().describe("Interactive: the objective held; batch: the deadline"),
});
type GroupOutput = z.infer<typeof GroupOutputSchema>;

const objectWith = <T>(key: string, what: string) =>
  z.custom<T>((v) => typeof v === "object" && v !== null && key in v, `must be ${what}`);

/** A mixed fleet's outputs (stack/outputs.ts FleetOutputsSchema `mixed`). */
export const MixedFleetOutputSchema = z
  .object({
    interactive: GroupOutputSchema.extend({
      objective: z.object({ users: z.number(), ttftP95Seconds: z.number(), itlP95Seconds: z.number() }),
    }),
    batch: GroupOutputSchema.extend({
      neededTokensPerSecond: z.number().describe("The job's tokens over its deadline's seconds"),
      daysForJob: z.number().nullable().describe("Days the job takes at the measured batch throughput"),
      deadlineDays: z.number(),
    }),
    windowSeconds: z.number().describe("Host seconds of the interactive run: the window both classes were measured in"),
    predicted: objectWith<DegradedPlan>("verdict", "a degraded plan").describe(
      "The configured groups as the hosts' own curves predict them, left-out hosts out of their groups: what the fleet can still promise (gate/plan/mixed-plan.ts degradedPlan)",
    ),
    plan: objectWith<MixedPlan>("homogeneous", "a mixed plan").describe(
      "The fewest hosts for this demand from the same curves, beside the homogeneous fleets (mixedPlan; gpuhost plan --curves)",
    ),
    curves: z
      .array(z.object({ service: z.string(), sweep: z.array(CurvePointSchema) }))
      .describe("Per service, one host's own sweep: what the prediction and the plan read"),
    verdict: z.string().describe("Each class against its objective, as measured"),
    warnings: z
      .array(z.string())
      .default([])
      .describe("Classes counted though not certified (certification.require: false), each with its failed checks"),
  })
  .describe(
    "A mixed fleet (router.groups): both classes at once through the router, each certified, beside the prediction",
  );
export type MixedFleetOutput = z.infer<typeof MixedFleetOutputSchema>;

interface Worker {
  name: string;
  url: string;
}

/** The workers among WS that belong to group G. */
function workersIn(groups: RouterGroups, g: GroupName, ws: Worker[]): Worker[] {
  return ws.filter((w) => groups[g].hosts.includes(w.name));
}

/** The demand the stack's groups and workload describe. */
export function groupDemand(
  groups: RouterGroups,
  workload: Workload | undefined,
): { interactive: InteractiveDemand; batch: BatchDemand } {
  const w = GateModule.WorkloadSchema.parse(workload ?? {});
  return {
    interactive: {
      users: groups.interactive.users,
      ttftP95Seconds: groups.interactive.ttftP95Seconds,
      itlP95Seconds: groups.interactive.itlP95Seconds,
    },
    batch: {
      completions: w.completions,
      outputTokensPerCompletion: w.outputTokensPerCompletion,
      deadlineDays: w.deadlineDays,
    },
  };
}

/** Per service of the groups, the first registered host's own sweep that has one; a service without any fails. */
export function groupCurves(
  groups: RouterGroups,
  registered: Worker[],
  curveOf: (host: string) => ServiceCurve["sweep"] | null | undefined,
): ServiceCurve[] {
  const curves: ServiceCurve[] = [];
  for (const g of GROUP_NAMES) {
    const group = groups[g];
    if (curves.some((c) => c.service === group.service)) continue;
    const host = registered.find((w) => group.hosts.includes(w.name) && (curveOf(w.name)?.length ?? 0) > 0);
    if (!host)
      throw new Error(
        `the ${g} group's hosts have no measured sweep of ${group.service}: the split is planned from the hosts' own curves (benchmark.concurrency)`,
      );
    curves.push({ service: group.service, sweep: curveOf(host.name)! });
  }
  return curves;
}

/** The configured groups' prediction: as degradedPlan judges them with DOWN hosts out, and the fewest hosts the curves call for. */
function predict(
  groups: RouterGroups,
  curves: ServiceCurve[],
  demand: { interactive: InteractiveDemand; batch: BatchDemand },
  down: HostsDown,
): { configured: MixedPlan; predicted: DegradedPlan; plan: MixedPlan } {
  const configured = configuredPlan(
    curves,
    {
      interactive: { service: groups.interactive.service, hosts: groups.interactive.hosts.length },
      batch: {
        service: groups.batch.service,
        hosts: groups.batch.hosts.length,
        perHostConcurrency: groups.batch.perHostConcurrency,
      },
    },
    demand.interactive.users,
  );
  return {
    configured,
    predicted: degradedPlan(curves, configured, demand.interactive, demand.batch, down),
    plan: mixedPlan(curves, demand.interactive, demand.batch),
  };
}

/** The groups before any request: their curves, the configured split and what it can promise. */
export interface PlannedGroups {
  groups: RouterGroups;
  registered: Worker[];
  leftOut: Worker[];
  demand: { interactive: InteractiveDemand; batch: BatchDemand };
  curves: ServiceCurve[];
  configured: MixedPlan;
  predicted: DegradedPlan;
  plan: MixedPlan;
}

/**
 * The split the fleet is measured against, from its hosts' own curves; throws when a group has no
 * host that passed its gate (its class cannot be served), with what the fleet can no longer promise.
 */
export function planGroups(
  groups: RouterGroups,
  ctx: {
    registered: Worker[];
    leftOut: Worker[];
    curveOf: (host: string) => ServiceCurve["sweep"] | null | undefined;
    workload: Workload | undefined;
  },
): PlannedGroups {
  const demand = groupDemand(groups, ctx.workload);
  const down = {
    interactive: workersIn(groups, "interactive", ctx.leftOut).length,
    batch: workersIn(groups, "batch", ctx.leftOut).length,
  };
  const empty = GROUP_NAMES.find((g) => workersIn(groups, g, ctx.registered).length === 0);
  // With a group empty there is no curve of its service to judge by: its class is simply not served.
  const curves = empty ? [] : groupCurves(groups, ctx.registered, ctx.curveOf);
  const { configured, predicted, plan } = predict(groups, curves, demand, down);
  if (empty)
    throw new Error(
      `the ${empty} group has no host that passed its gate (left out: ${workersIn(groups, empty, ctx.leftOut)
        .map((w) => w.name)
        .join(", ")}): ${predicted.verdict}`,
    );
  return {
    groups,
    registered: ctx.registered,
    leftOut: ctx.leftOut,
    demand,
    curves,
    configured,
    predicted,
    plan,
  };
}

export interface GroupsMeasureContext {
  /** Runs both classes at once through the router (mixed-run.ts runMixedTraffic, its router and options bound). */
  run: (classes: {
    interactive: { model: string; concurrency: number; requestsPerUser: number; speculative: boolean };
    batch: { model: string; concurrency: number; speculative: boolean };
    workers: { interactive: string[]; batch: string[] };
  }) => Promise<MixedTrafficResult>;
  /** The stack's benchmark.errorBudget and certification.require: the host's verdict's (gate verdict.ts). */
  plan: VerdictInput["plan"];
  /** The service a host ran when it was measured (its activeService); null or absent: not known. */
  activeServiceOf?: (host: string) => string | null | undefined;
  say: (line: string) => void;
}

/** A grouped fleet measured and judged: its outputs, and why it fails (null: it passes). */
export interface MeasuredGroups {
  mixed: MixedFleetOutput;
  failure: string | null;
}

/**
 * The grouped fleet measured, and judged by the one verdict (gate mixedVerdictOf) with the stack's
 * error budget and certification; a class the router sent to another group's hosts fails too.
 */
export async function measureGroups(p: PlannedGroups, ctx: GroupsMeasureContext): Promise<MeasuredGroups> {
  const { groups, demand, predicted, plan, curves } = p;
  if (p.leftOut.length > 0) ctx.say(`hosts left out of their groups: ${predicted.verdict}`);
  const result = await runGroups(p, ctx);
  const verdict = GateModule.mixedVerdictOf(
    GROUP_NAMES.map((g) => ({ group: g, model: result[g].model, level: result[g].level })),
    ctx.plan,
  );
  for (const w of verdict.warnings) ctx.say(`warning: ${w}`);
  const failures = [
    ...GROUP_NAMES.flatMap((g) => misrouted(p, g, result[g]) ?? []),
    ...(verdict.failure === null ? [] : [verdict.failure]),
  ];
  const i = measuredOf(p, result.interactive);
  const b = measuredOf(p, result.batch);
  const judged = judge(groups, demand, i, b);
  const group = (g: GroupName, m: GroupMeasured, meets: boolean): GroupOutput => ({
    service: groups[g].service,
    activeService: activeServiceOf(workersIn(groups, g, p.registered), ctx.activeServiceOf),
    model: groups[g].servedModelName,
    workers: workersIn(groups, g, p.registered).map((w) => w.name),
    leftOut: workersIn(groups, g, p.leftOut).map((w) => w.name),
    measured: m,
    meets,
  });
  const mixed: MixedFleetOutput = {
    interactive: { ...group("interactive", i, judged.meetsInteractive), objective: demand.interactive },
    batch: { ...group("batch", b, judged.meetsBatch), ...judged.deadline },
    windowSeconds: result.windowSeconds,
    predicted,
    plan,
    curves,
    verdict: judged.verdict,
    warnings: verdict.warnings,
  };
  return { mixed, failure: failures.length > 0 ? failures.join("; and ") : null };
}

/** Both classes at once, the batch sized from its group's curve (or as configured). */
async function runGroups(p: PlannedGroups, ctx: GroupsMeasureContext): Promise<MixedTrafficResult> {
  const { groups, configured } = p;
  const urls = (g: GroupName) => p.registered.filter((w) => groups[g].hosts.includes(w.name)).map((w) => w.url);
  const perHost = groups.batch.perHostConcurrency ?? configured.batch?.perHostConcurrency;
  if (perHost === undefined)
    throw new Error(
      `the batch group's ${groups.batch.service} curve has no level within the error budget: nothing sizes the batch class (set router.groups.batch.perHostConcurrency)`,
    );
  return ctx.run({
    interactive: {
      model: groups.interactive.servedModelName,
      concurrency: groups.interactive.users,
      requestsPerUser: groups.interactive.requestsPerUser,
      speculative: groups.interactive.service !== "autoregressive",
    },
    batch: {
      model: groups.batch.servedModelName,
      concurrency: perHost * urls("batch").length,
      speculative: groups.batch.service !== "autoregressive",
    },
    workers: { interactive: urls("interactive"), batch: urls("batch") },
  });
}

/** The router sent G's class to hosts outside its group (a name served where it should not be): why, or null. */
function misrouted(p: PlannedGroups, g: GroupName, r: ClassResult): string | null {
  const own = p.registered.filter((w) => p.groups[g].hosts.includes(w.name)).map((w) => w.url);
  // A worker whose counters could not be read (NaN) says nothing here; its own class's certificate says why.
  const strays = Object.entries(r.servedBy).filter(([url, t]) => !own.includes(url) && t > 0);
  if (strays.length === 0) return null;
  const named = strays.map(([url, t]) => `${p.registered.find((w) => w.url === url)?.name ?? url} (${t} tokens)`);
  return `the router sent the ${g} group's ${r.model} to hosts outside its group: ${named.join(", ")}`;
}

/** The services a group's hosts ran when measured, as they said (null: none said). */
function activeServiceOf(hosts: Worker[], of: GroupsMeasureContext["activeServiceOf"]): string | null {
  const ran = [...new Set(hosts.flatMap((w) => of?.(w.name) ?? []))];
  return ran.length === 0 ? null : ran.join(", ");
}

/** What a class measured, as the outputs say it (hosts by name). */
function measuredOf(p: PlannedGroups, r: ClassResult): GroupMeasured {
  return {
    concurrency: r.concurrency,
    requests: r.requests,
    errors: r.errors,
    errorRate: r.level.errorRate,
    withinErrorBudget: r.level.withinErrorBudget,
    errorExamples: r.level.errorExamples,
    outputTokensPerSecond: r.outputTokensPerSecond,
    ttftP95Seconds: r.ttftP95Seconds,
    itlPerTokenP95Seconds: r.itlPerTokenP95Seconds,
    certificate: r.level.certificate,
    servedBy: Object.fromEntries(
      Object.entries(r.servedBy)
        .filter(([, t]) => Number.isFinite(t))
        .map(([url, t]) => [p.registered.find((w) => w.url === url)?.name ?? url, t]),
    ),
  };
}

/** Each class against its objective: the interactive latencies, the batch throughput against the deadline. */
function judge(
  groups: RouterGroups,
  demand: { interactive: InteractiveDemand; batch: BatchDemand },
  i: GroupMeasured,
  b: GroupMeasured,
) {
  const o = demand.interactive;
  const meetsInteractive = meetsObjective(i.ttftP95Seconds, i.itlPerTokenP95Seconds, o);
  const needed = neededTokensPerSecond(demand.batch);
  const tps = b.outputTokensPerSecond;
  const meetsBatch = tps >= needed;
  const ms = (v: number | null) => (v === null ? "n/a" : `${(v * 1000).toFixed(1)} ms`);
  const tok = (v: number) => Math.round(v).toLocaleString("en-US");
  return {
    meetsInteractive,
    meetsBatch,
    deadline: {
      neededTokensPerSecond: needed,
      daysForJob: daysForJob(tps, demand.batch),
      deadlineDays: demand.batch.deadlineDays,
    },
    verdict: [
      `interactive (${groups.interactive.service}, ${i.concurrency} users): TTFT p95 ${i.ttftP95Seconds?.toFixed(2) ?? "n/a"} s of ${o.ttftP95Seconds}, ITL p95 ${ms(i.itlPerTokenP95Seconds)}/token of ${ms(o.itlP95Seconds)}: the objective is ${meetsInteractive ? "met" : "MISSED"}`,
      `batch (${groups.batch.service}, ${b.concurrency} in flight): ${tok(tps)} tok/s of the ${tok(needed)} the deadline needs: the deadline is ${meetsBatch ? "met" : "MISSED"}`,
    ].join("; "),
  };
}

/** A workload change on a measured grouped fleet: the deadline judged again, the plan made again, nothing re-measured. */
export function replanGroups(
  old: MixedFleetOutput,
  groups: RouterGroups,
  workload: Workload | undefined,
): MixedFleetOutput {
  const demand = groupDemand(groups, workload);
  const judged = judge(groups, demand, old.interactive.measured, old.batch.measured);
  const down = { interactive: old.interactive.leftOut.length, batch: old.batch.leftOut.length };
  const { predicted, plan } = predict(groups, old.curves, demand, down);
  return {
    ...old,
    batch: { ...old.batch, meets: judged.meetsBatch, ...judged.deadline },
    verdict: judged.verdict,
    predicted,
    plan,
  };
}
