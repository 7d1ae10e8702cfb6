/**
 * A host's measurement plan as the fleet runs it through the router: the one translation, so the
 * fleet never assembles its own run (the fleet once scaled concurrency but not `rate`, and every
 * rate run through a router failed: N hosts kept up with one host's rates).
 */
import { BenchPlanSchema, type BenchPlan, type BenchPlanInput } from "../base/schema";

/**
 * N workers see N hosts' worth of load: each concurrency level and each offered rate times `workers`
 * (requests per level follow, being a multiple of the level). What judges a level (error budget,
 * knee, SLO, shortfall, timeouts, lengths) stays the host's: the fleet is judged as a host is.
 * `minRepeats`: each level runs at least that many times (the fleet's figure carries an interval).
 * A scaled plan past the load generator's bounds throws one sentence naming the setting.
 */
export function forWorkers(
  plan: BenchPlanInput | undefined,
  workers: number,
  opts: { minRepeats?: number } = {},
): BenchPlan {
  if (!Number.isInteger(workers) || workers < 1)
    throw new Error(`a fleet plan needs a whole number of workers, at least 1 (got ${workers})`);
  const host = BenchPlanSchema.parse(plan ?? {});
  const scaled = BenchPlanSchema.safeParse({
    ...host,
    concurrency: host.concurrency.map((c) => c * workers),
    ...(host.rate ? { rate: host.rate.map((r) => r * workers) } : {}),
    repeats: Math.max(host.repeats, opts.minRepeats ?? 1),
  });
  if (!scaled.success) {
    const issue = scaled.error.issues[0];
    throw new Error(
      `benchmark.${issue.path.join(".")} times ${workers} workers is past a bound of the fleet benchmark: ${issue.message}`,
    );
  }
  return scaled.data;
}
