/**
 * The cheap re-check behind a refresh: one tiny chat completion, bounded by its own timeout.
 * Its reason is short and stable (no timings), so an unchanged host never shows as drift.
 */
import { baseUrl, makeAgent, type Endpoint } from "../transport/http";
import { probeGeneration } from "./probe";
import { VerifyPolicySchema, type VerifyPolicyInput } from "../base/schema";
import { withTimeout } from "../transport/timers";

export interface GenerationCheck {
  generating: boolean;
  /** "ok" or e.g. "connection refused", "HTTP 503", "invalid completion", "timeout". */
  check: string;
}

export async function checkGenerating(
  endpoint: Endpoint,
  policyInput: VerifyPolicyInput = {},
  timeoutSeconds = 60,
  signal?: AbortSignal,
): Promise<GenerationCheck> {
  const policy = VerifyPolicySchema.parse(policyInput);
  const agent = makeAgent(1);
  try {
    if (!endpoint.model) return { generating: false, check: "no model configured" };
    const base = baseUrl(endpoint.url);
    const model = endpoint.model;
    const outcome = await withTimeout(
      [signal],
      timeoutSeconds * 1000,
      () => `no answer within ${timeoutSeconds} s`,
      (s) => probeGeneration(agent, base, model, policy, { signal: s, apiKey: endpoint.apiKey, sampling: false }),
    );
    return outcome.ok ? { generating: true, check: "ok" } : { generating: false, check: outcome.summary };
  } finally {
    void agent.destroy().catch(() => undefined);
  }
}
