/**
 * Where a job is aimed, from a stack's outputs (`pulumi stack output --json`), read the way `gpuhost
 * plan` and `drift` read them: the fleet's router when the stack has one, else the host's active
 * service; the concurrency is the measured knee of what the job runs against (the last level measured
 * when no knee was found: the level the sustained figure comes from), and the certified sustained
 * tok/s is the plan the job is held to.
 */
import { z } from "zod";

export interface JobAim {
  endpoint: string;
  model: string;
  concurrency: number;
  certifiedTokensPerSecond: number;
  hosts: number;
  /** Simulated seconds per wall second of the host measured (the outputs' timeNote); 1 for real hardware. */
  timeScale: number;
  /** What the job runs against, in words. */
  against: string;
}

const Level = z.object({ concurrency: z.number().nullable().optional() });
const HostSchema = z.object({
  activeService: z.string(),
  endpoint: z.string(),
  model: z.string(),
  saturationConcurrency: z.number().nullable().optional(),
  sustainedOutputTokensPerSecond: z.number().optional(),
  sweep: z.array(Level).optional(),
  timeNote: z.string().optional(),
});
const OutputsSchema = z.object({
  gpuHosts: z.record(z.string(), z.unknown()),
  fleet: z
    .object({
      routerEndpoint: z.string(),
      // The workers the fleet was measured with (the outputs hold no count of them: a first version
      // read a `hosts` field no stack exports, and refused every real fleet's outputs).
      registered: z.array(z.unknown()),
      saturationConcurrency: z.number().nullable(),
      sustainedOutputTokensPerSecond: z.number(),
      sweep: z.array(Level),
    })
    .nullable()
    .optional(),
});

/** The knee, else the highest level measured (where the sustained figure was taken). */
function concurrencyOf(knee: number | null | undefined, sweep: z.infer<typeof Level>[] | undefined): number | null {
  if (typeof knee === "number" && knee > 0) return knee;
  const levels = (sweep ?? []).map((l) => l.concurrency).filter((c): c is number => typeof c === "number" && c > 0);
  return levels.length > 0 ? Math.max(...levels) : null;
}

function timeScaleOf(note: string | undefined): number {
  const m = /time scale ([\d.]+)/.exec(note ?? "");
  return m ? Number(m[1]) : 1;
}

/** The job's aim from OUTPUTS, or an error saying what the stack lacks. */
export function aimFromOutputs(outputs: unknown, stack: string): JobAim {
  const o = OutputsSchema.safeParse(outputs);
  if (!o.success) {
    const i = o.error.issues[0];
    throw new Error(
      `stack ${stack}'s outputs are not a gpuhost stack's (${i.path.map(String).join(".") || "the outputs"}: ${i.message}): was it brought up?`,
    );
  }
  const hosts = Object.entries(o.data.gpuHosts).flatMap(([name, h]) => {
    const r = HostSchema.safeParse(h);
    return r.success && r.data.sustainedOutputTokensPerSecond !== undefined ? [{ name, ...r.data }] : [];
  });
  if (hosts.length === 0) throw new Error(`stack ${stack} has no measured host in its outputs: no gate passed`);
  const first = hosts[0];
  const fleet = o.data.fleet;
  if (fleet) {
    const concurrency = concurrencyOf(fleet.saturationConcurrency, fleet.sweep);
    if (concurrency === null) throw new Error(`stack ${stack}'s fleet measured no concurrency level`);
    return {
      endpoint: fleet.routerEndpoint,
      model: first.model,
      concurrency,
      certifiedTokensPerSecond: fleet.sustainedOutputTokensPerSecond,
      hosts: fleet.registered.length,
      timeScale: timeScaleOf(first.timeNote),
      against: `the fleet's router (${fleet.registered.length} hosts of ${first.activeService})`,
    };
  }
  const concurrency = concurrencyOf(first.saturationConcurrency, first.sweep);
  if (concurrency === null) throw new Error(`stack ${stack}'s host ${first.name} measured no concurrency level`);
  return {
    endpoint: first.endpoint,
    model: first.model,
    concurrency,
    certifiedTokensPerSecond: first.sustainedOutputTokensPerSecond ?? 0,
    hosts: 1,
    timeScale: timeScaleOf(first.timeNote),
    against: `host ${first.name}'s ${first.activeService} service`,
  };
}
