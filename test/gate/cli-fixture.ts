/**
 * What the tests of `gpuhost verify | bench | plan | compare` share when they call the commands as
 * functions (cli/verify.ts, cli/compare.ts): an io that keeps what a command writes, and the argv
 * of a small benchmark run.
 */
import type { CliIo } from "../../cli/verify";

export interface CapturedIo extends CliIo {
  /** Everything written to stdout so far. */
  out: () => string;
  /** Everything written to stderr so far. */
  err: () => string;
}

/** A fresh io whose stdout and stderr are kept in memory. */
export function io(): CapturedIo {
  let out = "";
  let err = "";
  return {
    stdout: { write: (s: string) => (out += s) },
    stderr: { write: (s: string) => (err += s) },
    out: () => out,
    err: () => err,
  };
}

/** `gpuhost bench` against ENDPOINT at the given levels and token caps, then MORE options. */
export function benchArgv(
  endpoint: string,
  run: { concurrency: string; maxTokens: number; sweepMaxTokens: number },
  ...more: string[]
): string[] {
  return [
    "--endpoint",
    endpoint,
    "--concurrency",
    run.concurrency,
    "--max-tokens",
    String(run.maxTokens),
    "--sweep-max-tokens",
    String(run.sweepMaxTokens),
    ...more,
  ];
}
