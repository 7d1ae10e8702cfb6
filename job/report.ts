/**
 * What the job says of itself beyond the progress line: the summary a person pastes into a report
 * (every --summary-every minutes and at the end), and the same figures as Prometheus metrics for
 * node_exporter's textfile collector (`--textfile DIR`, the conventions of `gpuhost drift
 * --textfile`: one file per stack written whole and renamed, a timestamp series, a success series).
 */
import { Gauge, Registry } from "prom-client";
import { duration } from "./forecast";
import type { JobState } from "./tracker";

/** Bytes as MB or GB, as a person reads a disk's size. */
export function size(bytes: number | null): string {
  if (bytes === null) return "unknown";
  return bytes >= 1e9 ? `${(bytes / 1e9).toFixed(1)} GB` : `${(bytes / 1e6).toFixed(bytes >= 1e7 ? 0 : 2)} MB`;
}

/** The summary: plain lines, the figures of the progress line spelled out. */
export function summaryText(
  s: JobState,
  against: string,
  stopped: string | null = null,
  serverCounters: string | null = null,
): string {
  const f = s.forecast;
  const n = (v: number) => v.toLocaleString("en-US");
  return [
    `gpuhost job summary (${new Date().toISOString()}), against ${against}:`,
    `  recorded: ${n(f.done)} of ${n(s.total)} (${n(s.succeeded)} succeeded, ${n(s.failed)} failed; ${n(s.resumed)} by earlier runs)`,
    `  generated: ${n(s.tokens)} completion tokens, ${size(s.outputBytes)} of output`,
    `  throughput: ${f.tokensPerSecond === null ? "no rate yet" : `${n(Math.round(f.tokensPerSecond))} tok/s over the last minutes`}; ${f.planVerdict}`,
    `  remaining: ${n(f.remaining)} requests, ETA ${duration(f.etaSeconds)}`,
    ...(f.deadlineVerdict ? [`  deadline: ${f.deadlineVerdict}`] : []),
    `  projected output: ${size(f.projectedOutputBytes)} when every request has succeeded`,
    ...(serverCounters ? [`  server: ${serverCounters}`] : []),
    ...(stopped ? [`  stopped: ${stopped}`] : []),
  ].join("\n");
}

/** The exposition (Prometheus text format 0.0.4) of the job's state. */
export async function jobExposition(s: JobState, stack: string, stopped: string | null, atMs: number): Promise<string> {
  const registers = [new Registry()];
  const gauge = (name: string, help: string, v: number | null) => {
    // A figure not known yet is left out, not written as 0: an alert must not read "unknown" as a collapse.
    if (v !== null) new Gauge({ name, help, labelNames: ["stack"], registers }).set({ stack }, v);
  };
  const f = s.forecast;
  gauge("gpuhost_job_requests", "Requests in the job's input", s.total);
  gauge("gpuhost_job_succeeded", "Requests recorded in the output file", s.succeeded);
  gauge("gpuhost_job_failed", "Requests recorded in the errors file", s.failed);
  gauge("gpuhost_job_in_flight", "Requests sent and not yet recorded", s.inFlight);
  gauge("gpuhost_job_completion_tokens", "Completion tokens of the recorded successes", s.tokens);
  gauge("gpuhost_job_output_bytes", "Bytes of the output file", s.outputBytes);
  gauge("gpuhost_job_tokens_per_second", "Output tok/s over the last minutes (host time)", f.tokensPerSecond);
  gauge("gpuhost_job_plan_ratio", "The job's tok/s over the stack's certified sustained tok/s", f.ofPlan);
  gauge("gpuhost_job_eta_seconds", "Seconds until the last request is recorded at the current rate", f.etaSeconds);
  gauge(
    "gpuhost_job_projected_output_bytes",
    "The output file's size when every request has succeeded",
    f.projectedOutputBytes,
  );
  gauge(
    "gpuhost_job_deadline_met",
    "1 when the job makes --deadline at the current rate, 0 when not",
    f.deadline ? (f.deadline.meets ? 1 : 0) : null,
  );
  gauge(
    "gpuhost_job_more_hosts_needed",
    "Hosts of the measured kind to add to make --deadline",
    f.deadline?.moreHosts ?? null,
  );
  gauge(
    "gpuhost_job_success",
    "1 while the job runs or when it completed, 0 when it stopped early (see stopped)",
    stopped ? 0 : 1,
  );
  gauge("gpuhost_job_timestamp_seconds", "When this file was written, in seconds since the epoch", atMs / 1000);
  return registers[0].metrics();
}
