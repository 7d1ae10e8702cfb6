/**
 * Capacity plans from a measured sustained throughput: days = tokens / (tok/s x 86,400).
 * Pure arithmetic; a throughput of 0 yields null days and hosts rather than Infinity, which JSON
 * and stack outputs cannot carry.
 */
import { WorkloadSchema, type WorkloadInput } from "../base/schema";

export const SECONDS_PER_DAY = 86_400;

export interface CapacityPlan {
  sustainedOutputTokensPerSecond: number;
  completions: number;
  outputTokensPerCompletion: number;
  totalOutputTokens: number;
  tokensPerDayPerHost: number;
  daysOnOneHost: number | null;
  hosts: number;
  daysOnHosts: number | null;
  deadlineDays: number;
  /** Hosts needed to finish within deadlineDays at the measured throughput. */
  hostsForDeadline: number | null;
  bytesPerToken: number;
  rawStorageBytes: number;
  rawStorageGigabytes: number;
}

export function capacity(sustainedOutputTokensPerSecond: number, workloadInput: WorkloadInput = {}): CapacityPlan {
  if (!Number.isFinite(sustainedOutputTokensPerSecond) || sustainedOutputTokensPerSecond < 0) {
    throw new Error(`sustained throughput must be a finite number >= 0, got ${sustainedOutputTokensPerSecond}`);
  }
  const w = WorkloadSchema.parse(workloadInput);
  const total = w.completions * w.outputTokensPerCompletion;
  const perDay = sustainedOutputTokensPerSecond * SECONDS_PER_DAY;
  const daysOnOneHost = perDay > 0 ? total / perDay : null;
  const rawStorageBytes = total * w.bytesPerToken;
  return {
    sustainedOutputTokensPerSecond,
    completions: w.completions,
    outputTokensPerCompletion: w.outputTokensPerCompletion,
    totalOutputTokens: total,
    tokensPerDayPerHost: perDay,
    daysOnOneHost,
    hosts: w.hosts,
    daysOnHosts: daysOnOneHost === null ? null : daysOnOneHost / w.hosts,
    deadlineDays: w.deadlineDays,
    hostsForDeadline: daysOnOneHost === null ? null : Math.max(1, Math.ceil(daysOnOneHost / w.deadlineDays - 1e-9)),
    bytesPerToken: w.bytesPerToken,
    rawStorageBytes,
    rawStorageGigabytes: rawStorageBytes / 1e9,
  };
}
