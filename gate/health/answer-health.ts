/**
 * The answer score in the refresh's health check: the gate's answer check run again against the
 * score recorded at verification. A fall is drift (the next `up` verifies the service again).
 *
 * Why a tolerance and not equality: greedy decoding on real GPUs is not batch-invariant, so one
 * near-tie answer can flip between two runs of the same build; answerScoreMaxDrop (default 0.05,
 * one answer of the shipped 24) absorbs that, two or more answers lost are a change. Below the gate's
 * own passThreshold is always drift: the service would not pass the gate now.
 */
import { baseUrl, describeError, type Endpoint } from "../transport/http";
import type { VerifyPolicy } from "../base/schema";
import { checkAnswers, type AnswerCertificate } from "../readiness/answers";

export interface AnswerHealthFinding {
  field: "health.answerScore";
  expected: string;
  found: string;
}

/** The score a later check compares with: null when the verification did not check answers. */
export function answerScoreBaseline(answers: AnswerCertificate | undefined): number | null {
  return answers?.checked ? answers.score : null;
}

/** The check of a refresh: the score now, and a finding when it fell; throws when no answer came back. */
export async function checkAnswerScore(
  endpoint: Endpoint & { model: string },
  policy: VerifyPolicy,
  baseline: number,
  signal?: AbortSignal,
): Promise<{ score: number; finding: AnswerHealthFinding | null }> {
  // Each answer is bounded by the health timeout, like every health request; the set is finite.
  try {
    const cert = await checkAnswers(
      { base: baseUrl(endpoint.url), model: endpoint.model, apiKey: endpoint.apiKey },
      { ...policy, answers: { ...policy.answers, timeoutSeconds: policy.health.timeoutSeconds } },
      signal ?? new AbortController().signal,
    );
    const score = cert.score ?? 0;
    const least = Math.max(0, baseline - policy.health.answerScoreMaxDrop);
    const fell = score < least || (cert.threshold !== null && score < cert.threshold);
    if (!fell) return { score, finding: null };
    const wrong = cert.records.filter((r) => !r.right).slice(0, 2);
    return {
      score,
      finding: {
        field: "health.answerScore",
        expected: `at least ${Math.max(least, cert.threshold ?? 0).toFixed(2)} (verified ${baseline.toFixed(2)}, health.answerScoreMaxDrop ${policy.health.answerScoreMaxDrop}, passThreshold ${cert.threshold ?? "n/a"})`,
        found: `${cert.right} of ${cert.prompts} right (score ${score.toFixed(2)}): the service answers worse than when it was verified (the kernels, the weights, the chat template or the draft changed)${wrong.length ? `; e.g. ${wrong.map((r) => `${JSON.stringify(r.prompt)} got ${JSON.stringify(r.answer.slice(0, 60))}`).join("; ")}` : ""}`,
      },
    };
  } catch (e) {
    throw new Error(`the answer check: ${describeError(e)}`, { cause: e });
  }
}
