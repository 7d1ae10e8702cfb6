/**
 * The answer check against what this project did not write: llama.cpp's llama-server with
 * SmolLM2-135M-Instruct on the CPU (docs/real-server.md). The small model's score on the shipped set
 * is measured and printed (docs/answers.md records it); the test's threshold is set below it, said
 * here, because a 135M model is not the story's model class. And a real speculative server:
 * llama-server with `--model-draft` (the same GGUF as its own draft) beside the plain server, its
 * greedy answers compared prompt by prompt (the comparison's own answerAgreement) and the draft's
 * acceptance read from the server's own log.
 */
import { describe, expect, it } from "vitest";
import { answerAgreement, checkAnswers, type AnswerCertificate } from "../../gate/readiness/answers";
import { VerifyPolicySchema } from "../../gate/base/schema";
import { MODEL_ALIAS, realServerSuite, waitHealthy, type LlamaServer } from "./llama-server";

const suite = realServerSuite();
const { skip, server, install } = suite;

/**
 * SmolLM2-135M's threshold in this test, under its measured score (11 of 24, 0.46, docs/answers.md:
 * it gets arithmetic wrong, writes Python for JSON and ignores word counts), so that a server that
 * stopped answering (score 0, loops) still fails. The default 0.85 is for the story's model class.
 */
const SMOLLM2_THRESHOLD = 0.3;

async function answers(s: LlamaServer): Promise<AnswerCertificate> {
  const policy = VerifyPolicySchema.parse({
    // SmolLM2 does not think: the non-thinking budget (verification.answers.maxTokens) bounds each answer.
    thinkingToggle: true,
    answers: { concurrency: 2, maxTokens: 64, passThreshold: SMOLLM2_THRESHOLD, timeoutSeconds: 300 },
  });
  return checkAnswers({ base: s.url, model: MODEL_ALIAS }, policy, AbortSignal.timeout(600_000));
}

/**
 * The plain server's answers on the shipped set, measured once for the file: the score test reads
 * them, the speculative test compares against them. Greedy answers of one server are one measurement;
 * scoring the same 24 prompts twice cost minutes of two loaded CPU cores.
 */
let plain: Promise<AnswerCertificate> | undefined;
const plainAnswers = () => (plain ??= suite.shared({ parallel: 2, contextTokens: 4096 }).then(answers));

describe.skipIf(skip)("the answer check against llama.cpp's llama-server (a real server and model)", () => {
  it("SmolLM2-135M-Instruct on the shipped set: the score, measured and printed; above this test's own threshold", async () => {
    const cert = await plainAnswers();
    console.log(`SmolLM2-135M-Instruct, shipped answer set: ${cert.note}`);
    for (const r of cert.records.filter((x) => !x.right))
      console.log(`  wrong: ${JSON.stringify(r.prompt)} -> ${JSON.stringify(r.answer.slice(0, 80))} (${r.why})`);
    expect(cert.prompts).toBe(24);
    expect(cert.right).toBe(cert.records.filter((r) => r.right).length);
    expect(cert.passed).toBe(true);
  }, 900_000);

  it("a speculative llama-server (--model-draft, the same GGUF) beside the plain one: greedy agreement and acceptance, measured", async () => {
    const spec = await server({
      parallel: 2,
      contextTokens: 4096,
      args: ["--model-draft", install().model, "--spec-type", "draft-simple", "--spec-draft-n-max", "8"],
    });
    await waitHealthy(spec);
    const ar = await plainAnswers();
    const sp = await answers(spec);
    const agreement = answerAgreement(sp, ar);
    // The draft's acceptance from the server's own books (llama.cpp's /metrics with --metrics).
    const metrics = await (await fetch(`${spec.url}/metrics`)).text();
    const counter = (name: string) => Number(new RegExp(`^llamacpp:${name} (\\S+)$`, "m").exec(metrics)?.[1] ?? NaN);
    const drafted = counter("spec_decode_num_draft_tokens_total");
    const accepted = counter("spec_decode_num_accepted_tokens_total");
    const steps = counter("spec_decode_num_drafts_total");
    console.log(
      `speculative llama-server vs plain: ${agreement.note}; draft tokens accepted ${accepted} of ${drafted} in ${steps} verify steps (${(1 + accepted / steps).toFixed(2)} tokens per step)`,
    );
    expect(drafted).toBeGreaterThan(0);
    // The same model drafts for itself: nearly every draft token is what the target would say.
    expect(accepted / drafted).toBeGreaterThan(0.5);
    // Greedy speculative decoding verifies every token against the target: the answers are the plain
    // server's (bar float ties), so the comparison's own rule holds and it answers no worse.
    expect(agreement.exactMatchRate!).toBeGreaterThanOrEqual(0.6);
    expect(agreement.worse).toBe(false);
  }, 900_000);
});
