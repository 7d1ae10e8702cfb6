/**
 * What the tests of `gpuhost verify | bench | plan | compare` share when they call the commands as
 * functions (cli/verify.ts, cli/compare.ts): an io that keeps what a command writes, and the argv
 * of a small benchmark run; and VerifiedGeneration's create against a test's server.
 */
import type { CliIo } from "../../cli/verify";
import { create, PROVIDER_VERSION } from "../../components/verified-generation/provider";
import { cliFlags } from "../support/cli-flags";

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

/**
 * `gpuhost bench` against ENDPOINT at the given levels and output length (the sweep's, then the single
 * requests'), then RUN's other flags (written as for cliFlags), then MORE options.
 */
export function benchArgv(
  endpoint: string,
  run: { concurrency: string; maxTokens: string } & Record<string, string>,
  ...more: string[]
): string[] {
  return ["--endpoint", endpoint, ...cliFlags(run), ...more];
}

/** VerifiedGeneration's create (its provider function, no engine) against `url`, identities made up. */
export function createVerification(url: string, benchPlan: unknown, deadlineSeconds = 10): ReturnType<typeof create> {
  return create({
    providerVersion: PROVIDER_VERSION,
    endpoint: { url, model: "m" },
    serviceIdentity: "sglang-m.service@abc",
    toolkitFingerprint: "cuda-toolkit-13-0=13.0.2-1",
    environmentLock: "sglang==0.5.6",
    // The load servers answer filler text: these tests are about the benchmark after the gate, not the answers.
    verifyPolicy: { deadlineSeconds, answers: { file: "none" } },
    benchPlan,
  });
}
