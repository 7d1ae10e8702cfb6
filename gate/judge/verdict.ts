/**
 * One plan, one verdict: what a benchmark's result says of the server it measured, judged once here
 * for VerifiedGeneration, the fleet, the comparison and `gpuhost bench`. Each past verdict bug was a
 * consumer judging its own copy (the fleet's lacked the server-gone and stop-reason rules and failed
 * every rate run), so consumers only choose their words ("the benchmark", "the fleet benchmark")
 * and what a kind costs them (a failed create, an exit status, a service left out).
 *
 * The rules, in order (the first that applies is the verdict):
 * 1. the server went away mid-run: nothing from the run is used (`usable` false);
 * 2. a level broke the error budget: failure is never capacity, and a server that fails that many
 *    requests is not healthy, whatever the other levels measured;
 * 3. the run stopped (warmup failed, deadline, a hung single request) and measured no throughput:
 *    its reason is the diagnosis, and nothing from it is used;
 * 3b. no throughput, and a level whose validity certificate failed (certificate.ts: the server's
 *    counters disagree, the load was not applied, the client was the limit, the server restarted):
 *    a failure naming the failed checks, never a figure;
 * 4. every level was a rate the server kept up with, within the budget, and the client sent on
 *    schedule: the server is healthy; it served all the load offered, which is no capacity figure
 *    (`capacity` false: offer more);
 * 5. no throughput, and a level where the client fell behind its own schedule: the client's lag, never
 *    the server's capacity, and no verdict on the server either (a failure naming the client);
 * 6. no throughput otherwise (every level answerless, nothing counted): a failure;
 * 7. otherwise healthy, with a capacity figure (`complete` says whether every level ran).
 *
 * A mixed fleet (mixedVerdictOf) is judged by the same rules, each class as a one-level sweep.
 */
import { certificateText, type Certificate } from "./certificate";
import { levelName } from "./levels";
import { answerless, judgeLevels, uncertifiedFigure, withinErrorBudget } from "./saturation";

/** The fields of a benchmark level the verdict reads (LevelSummary has them all). */
export interface VerdictLevel {
  mode: "closed" | "open";
  level: number;
  requests: number;
  errors: number;
  withinErrorBudget: boolean;
  errorExamples: string[];
  keptUp: boolean | null;
  answerlessRequests?: number;
  /** The client fell behind its schedule at this rate (open loop: sent below planned, or late); null for a closed loop. */
  clientLimited?: boolean | null;
  /** The level's validity certificate (certificate.ts); null or absent: none gathered. */
  certificate?: Certificate | null;
}

/** The fields of a result the verdict reads (BenchSummary has them all). */
export interface VerdictInput {
  sweep: readonly VerdictLevel[];
  complete: boolean;
  stopReason: string | null;
  serverGone: string | null;
  sustainedOutputTokensPerSecond: number;
  saturationVerdict: string;
  plan: { errorBudget: number; certification?: { require: boolean } };
}

export type Verdict =
  | {
      ok: true;
      kind: "capacity" | "offered-load";
      /** A capacity figure was measured (false: every rate was kept up with; sustained 0). */
      capacity: boolean;
      complete: boolean;
      /** One sentence: the saturation verdict. */
      summary: string;
    }
  | {
      ok: false;
      kind: "server-gone" | "error-budget" | "stopped" | "uncertified" | "client-limited" | "no-throughput";
      /** False when nothing of the run may be used (the server went away, the run stopped before measuring). */
      usable: boolean;
      /** What the run did, as a predicate of "the benchmark" / "the fleet benchmark". */
      failure: string;
    };

export function verdictOf(result: VerdictInput): Verdict {
  if (result.serverGone !== null)
    return { ok: false, kind: "server-gone", usable: false, failure: `stopped: ${result.serverGone}` };
  const failed = result.sweep.filter((l) => !l.withinErrorBudget);
  if (failed.length > 0) {
    const detail = failed
      .map((l) => `${levelName(l)}: ${l.errors}/${l.requests} failed (${l.errorExamples.slice(0, 2).join(" | ")})`)
      .join("; ");
    return {
      ok: false,
      kind: "error-budget",
      usable: true,
      failure: `broke its error budget of ${(result.plan.errorBudget * 100).toFixed(2)} % at ${detail} (raise benchmark.errorBudget only if these errors are expected)`,
    };
  }
  const measured = result.sustainedOutputTokensPerSecond > 0;
  if (!measured && result.stopReason !== null)
    return { ok: false, kind: "stopped", usable: false, failure: `stopped: ${result.stopReason}` };
  const uncertified = uncertifiedLevels(result.sweep, result.plan);
  if (!measured && uncertified.length > 0)
    return {
      ok: false,
      kind: "uncertified",
      usable: true,
      failure: `measured no certified level: ${uncertified.map((l) => `${levelName(l)} ${certificateText(l.certificate)}`).join("; ")}`,
    };
  if (!measured && keptUpWithEveryRate(result.sweep))
    return {
      ok: true,
      kind: "offered-load",
      capacity: false,
      complete: result.complete,
      summary: result.saturationVerdict,
    };
  const lagging = result.sweep.filter((l) => l.clientLimited === true);
  if (!measured && lagging.length > 0)
    return {
      ok: false,
      kind: "client-limited",
      usable: true,
      failure: `could not offer ${lagging.map((l) => levelName(l)).join(", ")} on schedule (the client fell behind, not the server: ${result.saturationVerdict})`,
    };
  if (!measured) {
    const examples = result.sweep.flatMap((l) => l.errorExamples).slice(0, 3);
    return {
      ok: false,
      kind: "no-throughput",
      usable: true,
      failure: `measured no throughput after the gate passed (complete: ${result.complete}; ${result.saturationVerdict}); errors: ${examples.join(" | ") || "none"}`,
    };
  }
  return { ok: true, kind: "capacity", capacity: true, complete: result.complete, summary: result.saturationVerdict };
}

/**
 * The levels that would count but are not certified, where the plan requires certificates: the one
 * rule behind the verdict and the commands' exit status 5.
 */
export function uncertifiedLevels<L extends VerdictLevel>(sweep: readonly L[], plan: VerdictInput["plan"]): L[] {
  if (plan.certification?.require === false) return [];
  return sweep.filter((l) => uncertifiedFigure(l, plan.errorBudget));
}

/** An open loop whose every level the server kept up with and answered: it served the load offered. */
function keptUpWithEveryRate(sweep: readonly VerdictLevel[]): boolean {
  return (
    sweep.length > 0 &&
    sweep.every((l) => l.mode === "open" && l.keptUp === true && l.clientLimited !== true && !answerless(l))
  );
}

/** One class of a mixed fleet: the group it ran on, its served name, and its level (mixed-run.ts ClassResult.level). */
export interface MixedClass {
  group: string;
  model: string;
  level: VerdictLevel & Parameters<typeof judgeLevels>[0][number];
}

/** A mixed fleet's verdict: the failure of the classes that failed (null: none), and what is said beside a pass. */
export interface MixedVerdict {
  failure: string | null;
  warnings: string[];
}

/**
 * A mixed fleet judged as one host is: each class is a one-level sweep, judged (judgeLevels) and
 * given its verdict (verdictOf) under the stack's error budget and certification.require, so a
 * knob that reaches the host's verdict reaches the fleet's. A failure names its group and model;
 * a class whose certificate failed while the stack does not require one is a warning, as a host's
 * level is then reported and counted.
 */
export function mixedVerdictOf(
  classes: readonly MixedClass[],
  plan: VerdictInput["plan"],
  serverGone: string | null = null,
): MixedVerdict {
  const failures: string[] = [];
  const warnings: string[] = [];
  for (const c of classes) {
    // The stack's budget judges, whatever the level was summarised with.
    const level = { ...c.level, withinErrorBudget: withinErrorBudget(c.level, plan.errorBudget) };
    const knee = judgeLevels([level], {
      errorBudget: plan.errorBudget,
      minGain: 0,
      requireCertified: plan.certification?.require !== false,
    });
    const v = verdictOf({
      sweep: [level],
      complete: true,
      stopReason: null,
      serverGone,
      sustainedOutputTokensPerSecond: knee.sustainedOutputTokensPerSecond,
      saturationVerdict: knee.verdict,
      plan,
    });
    const who = `the ${c.group} group (${c.model})`;
    if (!v.ok) failures.push(`of ${who} ${v.failure}`);
    else if (c.level.certificate?.certified === false)
      warnings.push(`${who} is ${certificateText(c.level.certificate)}; counted anyway (certification.require: false)`);
  }
  return { failure: failures.length > 0 ? failures.join("; and ") : null, warnings };
}
