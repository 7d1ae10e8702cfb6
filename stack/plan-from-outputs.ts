// Capacity plans from a host stack's outputs, the Pulumi way: another stack reads them through
// StackReference (examples/capacity-plan) and asks, per service, how many hosts a job needs by its
// deadline. Parsed with the one output schema, so a stack whose outputs changed shape is refused by
// name instead of planned from undefined. No Pulumi import.
import { z } from "zod";
import { capacity } from "../gate/plan/capacity";
import { HostOutputsSchema } from "./outputs";

export interface JobSpec {
  completions: number;
  outputTokensPerCompletion: number;
  deadlineDays: number;
}

export interface ServicePlan {
  host: string;
  service: string;
  sustainedOutputTokensPerSecond: number;
  daysOnOneHost: number | null;
  hostsForDeadline: number | null;
}

/** Per host and service: the measured sustained tok/s and the hosts the job needs by its deadline. */
export function hostsForJob(gpuHosts: unknown, job: JobSpec): ServicePlan[] {
  // Only what a plan reads: a host left out of a fleet (no measurement) plans nothing rather than failing.
  const schema = z.object({
    activeService: HostOutputsSchema.shape.activeService,
    sustainedOutputTokensPerSecond: z.number().optional(),
    comparison: z
      .object({
        services: z.array(z.object({ service: z.string(), sustainedOutputTokensPerSecond: z.number().nullable() })),
      })
      .nullable()
      .optional(),
  });
  const hosts = Object.entries((gpuHosts ?? {}) as Record<string, unknown>).map(([name, o]) => {
    const r = schema.safeParse(o);
    if (!r.success) throw new Error(`gpuHosts.${name} is not a gpuhost host's outputs: ${r.error.issues[0]?.message}`);
    return [name, r.data] as const;
  });
  const plan = (host: string, service: string, tokPerSec: number): ServicePlan => {
    const p = capacity(tokPerSec, { ...job, hosts: 1 });
    return {
      host,
      service,
      sustainedOutputTokensPerSecond: tokPerSec,
      daysOnOneHost: p.daysOnOneHost,
      hostsForDeadline: p.hostsForDeadline,
    };
  };
  return hosts.flatMap(([name, h]) => {
    const compared = (h.comparison?.services ?? []).filter(
      (s): s is typeof s & { sustainedOutputTokensPerSecond: number } =>
        typeof s.sustainedOutputTokensPerSecond === "number",
    );
    if (compared.length) return compared.map((s) => plan(name, s.service, s.sustainedOutputTokensPerSecond));
    return h.sustainedOutputTokensPerSecond === undefined
      ? []
      : [plan(name, h.activeService, h.sustainedOutputTokensPerSecond)];
  });
}
