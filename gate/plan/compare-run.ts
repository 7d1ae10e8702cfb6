/**
 * Measures each service of one host in turn, through the same gate and the same workload: make it
 * the active unit (one at a time: they share the GPUs), wait until it really generates (verify),
 * check its speculative acceptance against the floor, run the sweep. Then compare (compare.ts) and,
 * with `auto`, leave the winner active; otherwise put back the service that was active before.
 *
 * A cache keyed by each service's identity (its unit file) and everything that shapes the
 * measurement means a re-run with nothing changed re-measures nothing, and starts no service.
 */
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { acceptanceFailure, measureAcceptance } from "../readiness/acceptance";
import { certificateText } from "../judge/certificate";
import {
  compareServices,
  SERVICE_LABEL,
  type Comparison,
  type JobInput,
  type ServiceMeasurement,
  type ServiceName,
} from "./compare";
import type { Endpoint } from "../transport/http";
import type { BenchPlan, VerifyPolicyInput } from "../base/schema";
import { levelName, type SweepLevel } from "../judge/levels";
import { measureSweep } from "../run/load";
import { judgeLevels } from "../judge/saturation";
import { verdictOf } from "../judge/verdict";
import { verify, type GateHooks } from "../readiness/verify";
import { answerAgreement, type AnswerAgreement, type AnswerCertificate } from "../readiness/answers";
import { VerifyPolicySchema } from "../base/schema";
import { levelsOf, requestsOf } from "../base/workload";

export interface CompareHooks {
  /** Make `service` the one running service (its unit started, the others stopped). */
  activate(service: ServiceName): Promise<void>;
  /** Changes whenever the service's definition changes (e.g. sha256 of its unit file). */
  identity(service: ServiceName): Promise<string>;
  /**
   * The service's unit as the gate reads it (state, last journal lines): a unit systemd reports
   * failed or restarted ends its gate at once, named, instead of at the deadline.
   */
  unit?(service: ServiceName): Pick<GateHooks, "unit" | "serviceState" | "serviceLogs">;
  onProgress?: (line: string) => void;
}

export interface CompareOptions {
  endpoint: Endpoint;
  services: ServiceName[];
  /** Draft of each speculative service, for the acceptance floor's message; its own floor, if it has one. */
  drafts: Partial<Record<ServiceName, { algorithm: string; draftModelPath: string; acceptanceFloor?: number }>>;
  acceptanceFloor: number;
  /**
   * The host's one benchmark plan (gate/base/schema.ts), as VerifiedGeneration's benchmark takes it: the
   * levels or rates, the requests' length, workload and thinking, the SLO, repeats, the request
   * timeout and everything that judges a level (error budget, knee, shortfall, certification).
   */
  plan: BenchPlan;
  timeScale: number;
  verifyPolicy: VerifyPolicyInput;
  job: JobInput;
  /** true: leave the winner active; false: leave `restore` active. */
  auto: boolean;
  restore: ServiceName;
  /** JSON file of earlier measurements; absent: always measure. */
  cacheFile?: string;
}

/** What judges a level and a sweep: the same settings as VerifiedGeneration's benchmark. */
export type Judgement = Pick<
  BenchPlan,
  "errorBudget" | "kneeMinGain" | "kneeMaxTtftP95Seconds" | "rateShortfall" | "certification"
>;

function judgementOf(opts: CompareOptions): Judgement {
  const { errorBudget, kneeMinGain, kneeMaxTtftP95Seconds, rateShortfall, certification } = opts.plan;
  return { errorBudget, kneeMinGain, kneeMaxTtftP95Seconds, rateShortfall, certification };
}

export interface ServiceOutcome {
  service: ServiceName;
  measured: boolean;
  /** Why the service is out of the comparison (not ready, acceptance below the floor). */
  failure: string | null;
  acceptanceLength: number | null;
  sweep: SweepLevel[];
  /** The gate's answer certificate for this service (absent in a cache written before answers were checked). */
  answers?: AnswerCertificate;
  /** Speculative services: greedy answers against autoregressive's on the same prompts. */
  agreement?: AnswerAgreement | null;
}

export interface CompareResult {
  outcomes: ServiceOutcome[];
  comparison: Comparison | null;
  activeAfter: ServiceName;
  /** Services measured this run (0 on a re-run with nothing changed). */
  measuredNow: number;
  timeScale: number;
}

type Cache = Record<string, { key: string; outcome: ServiceOutcome }>;

function readCache(file: string | undefined): Cache {
  if (!file || !fs.existsSync(file)) return {};
  try {
    return JSON.parse(fs.readFileSync(file, "utf8")) as Cache;
  } catch {
    return {}; // a damaged cache only costs a re-measurement
  }
}

function measurementKey(opts: CompareOptions, identity: string): string {
  const { plan, timeScale, acceptanceFloor } = opts;
  // The whole plan, its judgement too: each cached level carries its verdicts (within the budget,
  // kept up, certified).
  const what = {
    identity,
    plan,
    timeScale,
    acceptanceFloor,
    answers: VerifyPolicySchema.parse(opts.verifyPolicy).answers,
  };
  return createHash("sha256").update(JSON.stringify(what)).digest("hex");
}

const knee = (j: Judgement) => ({
  errorBudget: j.errorBudget,
  minGain: j.kneeMinGain,
  maxTtftP95Seconds: j.kneeMaxTtftP95Seconds,
  requireCertified: j.certification.require,
});

export async function runComparison(opts: CompareOptions, hooks: CompareHooks): Promise<CompareResult> {
  const say = hooks.onProgress ?? (() => undefined);
  const cache = readCache(opts.cacheFile);
  const outcomes: ServiceOutcome[] = [];
  let active: ServiceName | null = null;
  let measuredNow = 0;
  for (const service of opts.services) {
    const key = measurementKey(opts, await hooks.identity(service));
    const cached = cache[service];
    if (cached && cached.key === key) {
      say(`${SERVICE_LABEL[service]}: unchanged since the last comparison, not re-measured`);
      outcomes.push({ ...cached.outcome, measured: false });
      continue;
    }
    say(`${SERVICE_LABEL[service]}: starting it (the others stop) and waiting until it generates`);
    await hooks.activate(service);
    active = service;
    const outcome = await measureService(opts, service, hooks.unit?.(service) ?? {}, say);
    measuredNow++;
    outcomes.push(outcome);
    cache[service] = { key, outcome };
  }
  const vetoes = answerVerdicts(outcomes, VerifyPolicySchema.parse(opts.verifyPolicy).answers.speculativeMinExactMatch);
  const usable = outcomes.filter((o) => o.failure === null && o.sweep.length > 0);
  const comparison =
    usable.length > 0
      ? compareServices(
          usable.map((o): ServiceMeasurement => ({
            service: o.service,
            sweep: o.sweep,
            acceptanceLength: o.acceptanceLength,
            ...vetoes.get(o.service),
          })),
          opts.job,
          knee(judgementOf(opts)),
        )
      : null;
  const wanted = opts.auto && comparison ? comparison.recommended : opts.restore;
  if (active !== wanted || measuredNow === 0) {
    say(`leaving ${SERVICE_LABEL[wanted]} active${opts.auto ? " (services.active: auto)" : ""}`);
    await hooks.activate(wanted);
  }
  if (opts.cacheFile) {
    fs.mkdirSync(path.dirname(opts.cacheFile), { recursive: true });
    fs.writeFileSync(opts.cacheFile, JSON.stringify(cache) + "\n");
  }
  return { outcomes, comparison, activeAfter: wanted, measuredNow, timeScale: opts.timeScale };
}

async function measureService(
  opts: CompareOptions,
  service: ServiceName,
  unit: Pick<GateHooks, "unit" | "serviceState" | "serviceLogs">,
  say: (line: string) => void,
): Promise<ServiceOutcome> {
  const out: ServiceOutcome = { service, measured: true, failure: null, acceptanceLength: null, sweep: [] };
  const model = await readyToMeasure(opts, service, unit, say, out);
  if (model !== null) await sweepService(opts, service, model, say, out);
  return out;
}

/**
 * The gate (verify) and, for a speculative service, its acceptance against the floor: the model to
 * measure, or null with the failure set on OUT.
 */
async function readyToMeasure(
  opts: CompareOptions,
  service: ServiceName,
  unit: Pick<GateHooks, "unit" | "serviceState" | "serviceLogs">,
  say: (line: string) => void,
  out: ServiceOutcome,
): Promise<string | null> {
  const ready = await verify(opts.endpoint, opts.verifyPolicy, {
    ...unit,
    onPhase: (phase, detail) => say(`${SERVICE_LABEL[service]}: ${phase}: ${detail}`),
  });
  out.answers = ready.answers;
  if (!ready.ready || !ready.model) {
    out.failure = `not ready: ${ready.diagnosis ?? ready.phase}`;
    say(`${SERVICE_LABEL[service]}: ${out.failure}`);
    return null;
  }
  const draft = opts.drafts[service];
  if (draft) {
    const m = await measureAcceptance(opts.endpoint);
    out.acceptanceLength = m.perRequest ?? m.serverWide;
    out.failure = acceptanceFailure(m, draft.acceptanceFloor ?? opts.acceptanceFloor, draft);
    say(`${SERVICE_LABEL[service]}: acceptance ${out.acceptanceLength?.toFixed(2) ?? "n/a"} tokens per step`);
    if (out.failure) {
      say(`${SERVICE_LABEL[service]}: ${out.failure}`);
      return null;
    }
  }
  return ready.model;
}

/** The plan's sweep on a ready service, judged by the one verdict; a run nothing of which may be used sets the failure. */
async function sweepService(
  opts: CompareOptions,
  service: ServiceName,
  model: string,
  say: (line: string) => void,
  out: ServiceOutcome,
): Promise<void> {
  const judgement = judgementOf(opts);
  const draft = opts.drafts[service];
  const measured = await measureSweep(opts.endpoint, model, {
    ...levelsOf(opts.plan),
    requests: requestsOf(opts.plan),
    requestsPerLevel: opts.plan.requestsPerConcurrency,
    repeats: opts.plan.repeats,
    requestTimeoutSeconds: opts.plan.requestTimeoutSeconds,
    timeScale: opts.timeScale,
    judgement: {
      errorBudget: judgement.errorBudget,
      rateShortfall: judgement.rateShortfall,
      certification: judgement.certification,
      slo: opts.plan.slo,
    },
    acceptanceFloor: draft ? (draft.acceptanceFloor ?? opts.acceptanceFloor) : null,
    clientThreads: opts.plan.clientThreads,
    onLevel: (l) => say(`${SERVICE_LABEL[service]}: ${sweepLevelLine(l)}`),
  });
  out.sweep = measured.sweep;
  // The one verdict (verdict.ts), from the sweep as the comparison judges it. A run nothing of which
  // may be used (the server went away) leaves the service out; levels over the budget stay in the
  // table, excluded from its figures by the same judgement, and the command's exit says so.
  const judged = judgeLevels(measured.sweep, knee(judgement));
  const verdict = verdictOf({
    sweep: measured.sweep,
    complete: measured.serverGone === null,
    stopReason: measured.serverGone,
    serverGone: measured.serverGone,
    sustainedOutputTokensPerSecond: judged.sustainedOutputTokensPerSecond,
    saturationVerdict: judged.verdict,
    plan: judgement,
  });
  if (!verdict.ok && !verdict.usable) {
    out.failure = measured.serverGone ?? verdict.failure;
    say(`${SERVICE_LABEL[service]}: ${out.failure}`);
  }
}

/**
 * Each speculative service's greedy answers against the autoregressive service's (the same prompts,
 * the same gate): the agreement is set on its outcome, and a service that answers worse (a lower
 * score, or equal answers on fewer than minExactMatch of the prompts) gets the reason it is never
 * recommended. Answers not checked on either side: said, and nothing vetoed.
 */
export function answerVerdicts(
  outcomes: ServiceOutcome[],
  minExactMatch: number,
): Map<ServiceName, { answers: string; notRecommended: string | null }> {
  const verdicts = new Map<ServiceName, { answers: string; notRecommended: string | null }>();
  const ar = outcomes.find((o) => o.service === "autoregressive")?.answers;
  for (const o of outcomes) {
    if (!o.answers) continue;
    if (o.service === "autoregressive" || !ar) {
      verdicts.set(o.service, { answers: o.answers.note, notRecommended: null });
      continue;
    }
    const a = answerAgreement(o.answers, ar);
    o.agreement = a;
    const fewMatches = a.exactMatchRate !== null && a.exactMatchRate < minExactMatch;
    const why = a.worse
      ? `its answers score ${a.speculativeScore?.toFixed(2) ?? "n/a"}, below autoregressive's ${a.autoregressiveScore?.toFixed(2) ?? "n/a"}`
      : fewMatches
        ? `its greedy answers equal autoregressive's on ${(100 * a.exactMatchRate!).toFixed(0)} % of the prompts, under verification.answers.speculativeMinExactMatch ${minExactMatch}`
        : null;
    verdicts.set(o.service, { answers: a.note, notRecommended: why });
  }
  return verdicts;
}

/** One line per level as it ends: throughput, goodput, TTFT, acceptance, and what it counts for. */
function sweepLevelLine(l: SweepLevel): string {
  const name = l.mode === "closed" ? `concurrency ${l.level}` : levelName(l);
  const ci = l.throughput.halfWidth !== null ? ` ± ${l.throughput.halfWidth.toFixed(1)}` : "";
  const accept = l.acceptanceLength !== null ? `, accept ${l.acceptanceLength.toFixed(2)}` : "";
  const rate =
    l.mode === "open"
      ? `, achieved ${l.achievedRequestsPerSecond?.toFixed(2) ?? "n/a"} req/s${l.keptUp === false ? " (saturated)" : ""}`
      : "";
  const failed = l.withinErrorBudget ? "" : `, FAILED: ${l.errors}/${l.requests} errors over the budget`;
  return `${name}: ${l.throughput.mean.toFixed(1)} tok/s${ci}, goodput ${l.goodput.mean.toFixed(1)}, TTFT p95 ${l.ttftP95Seconds?.toFixed(2) ?? "n/a"} s${accept}${rate}${failed}; ${certificateText(l.certificate)}`;
}
