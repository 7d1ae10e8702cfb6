/**
 * The simulated model's answer table: a stand-in, not a model. It answers the gate's shipped answer
 * set (gate/base/answer-set.ts) with the set's own reference answers, so a simulated service
 * passes the answer check by default, and two faults answer it wrong the ways real services do:
 * `wrong-answers` fluently (another prompt's right answer: the right shape, the wrong content, with
 * usage and counters as correct as ever) and `speculative-divergence` on speculative services only
 * (every other prompt, as a draft or verify kernel that changes greedy output would).
 */
import { DEFAULT_ANSWER_ITEMS } from "../gate/base/answer-set";
import type { SimState } from "./state";

const TABLE = new Map<string, number>(DEFAULT_ANSWER_ITEMS.map((item, i) => [item.prompt.trim(), i]));

/** The words of a reference answer, as the simulator's tokens (each with its leading space). */
function tokensOf(text: string): string[] {
  return text.split(/(?= )/);
}

/** The table's answer to PROMPT (faults applied), or null when the prompt is not in the shipped set. */
export function tableAnswer(state: SimState, prompt: string): string[] | null {
  const i = TABLE.get(prompt.trim());
  if (i === undefined) return null;
  const diverges = state.has("speculative-divergence") && state.profile.speculative !== null && i % 2 === 1;
  const wrong = state.has("wrong-answers") || diverges;
  const item = DEFAULT_ANSWER_ITEMS[wrong ? (i + 1) % DEFAULT_ANSWER_ITEMS.length : i];
  return tokensOf(item.reference ?? "");
}
