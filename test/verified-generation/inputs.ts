/**
 * VerifiedGeneration's inputs as the provider tests give them: a made-up service on the tiny model at
 * URL with a benchmark small enough for a unit test (one 64-token single request, 64-token requests
 * at C=2); OVER replaces any input whole.
 */
import { PROVIDER_VERSION } from "../../components/verified-generation/provider";

export function verificationInputs(url: string, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    providerVersion: PROVIDER_VERSION,
    endpoint: { url, model: "tiny" },
    serviceIdentity: "sglang-tiny.service@abc",
    toolkitFingerprint: "cuda-toolkit-13-0=13.0.2-1",
    environmentLock: "sglang==0.5.6",
    verifyPolicy: { deadlineSeconds: 20 },
    benchPlan: {
      singleRequestMaxTokens: [64],
      singleRequestPrompts: 1,
      concurrency: [2],
      sweepMaxTokens: 64,
      requestsPerConcurrency: 1,
    },
    ...over,
  };
}
