/**
 * The prompts of the answer check, and how one answer is judged. A leaf: it imports nothing of the
 * gate, so the simulator's answer table (simulator/answers.ts) reads the same shipped set.
 *
 * Why these prompts: each has one answer a large instruction model gives almost always and fluent
 * garbage almost never (a number, a name, a JSON object that parses with given keys, a word count),
 * so a wrong chat template, broken kernels or a diverging speculative draft shows as a score, in
 * seconds. It is not an accuracy benchmark: a model can pass and still be bad at the team's work.
 */
import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";

/** One prompt and how its visible answer is checked (every check given must hold). */
export interface AnswerItem {
  prompt: string;
  /** A regular expression (source, case-insensitive) the visible answer must match. */
  expect?: string;
  /** The answer must hold a JSON object with these keys (fences and text around it allowed). */
  jsonKeys?: string[];
  /** The answer must have exactly this many words. */
  words?: number;
  /** A right answer: the simulator's table (a stand-in model answers the shipped set with these). */
  reference?: string;
}

export interface AnswerSet {
  /** "default" or the file it was read from. */
  name: string;
  items: AnswerItem[];
  /** sha256 of the set's prompts and checks: a certificate names the set it holds for. */
  digest: string;
}

const number = (n: string) => `(?<![\\d.])${n}(?![\\d]|\\.\\d)`;
const ask = (q: string) => `${q} Answer with the number only.`;
const json = (what: string) => `Return only a JSON object ${what}. No other text.`;

/** The shipped set (>= 20): arithmetic, facts, JSON objects and word counts. */
export const DEFAULT_ANSWER_ITEMS: readonly AnswerItem[] = [
  { prompt: ask("What is 17 + 25?"), expect: number("42"), reference: "42" },
  { prompt: ask("What is 12 * 12?"), expect: number("144"), reference: "144" },
  { prompt: ask("What is 1000 - 1?"), expect: number("999"), reference: "999" },
  { prompt: ask("What is 81 divided by 9?"), expect: number("9"), reference: "9" },
  { prompt: ask("What is 15% of 200?"), expect: number("30"), reference: "30" },
  { prompt: ask("What is 2 to the power of 10?"), expect: number("1,?024"), reference: "1024" },
  { prompt: ask("How many days are in a week?"), expect: `${number("7")}|\\bseven\\b`, reference: "7" },
  {
    prompt: ask("At sea level, at what temperature in degrees Celsius does water boil?"),
    expect: number("100"),
    reference: "100",
  },
  { prompt: "What is the capital of France? Answer with one word.", expect: "\\bparis\\b", reference: "Paris" },
  {
    prompt: "What is the chemical symbol for gold? Answer with the symbol only.",
    expect: "(?<![a-z])au(?![a-z])",
    reference: "Au",
  },
  { prompt: "Which planet is known as the Red Planet? Answer with one word.", expect: "\\bmars\\b", reference: "Mars" },
  {
    prompt: "Who wrote the play Romeo and Juliet? Answer with the author's name only.",
    expect: "shakespeare",
    reference: "William Shakespeare",
  },
  {
    prompt: "What is the largest ocean on Earth? Answer with its name only.",
    expect: "\\bpacific\\b",
    reference: "Pacific",
  },
  {
    prompt: "Translate 'thank you' into French. Answer with the translation only.",
    expect: "\\bmerci\\b",
    reference: "Merci",
  },
  {
    prompt: "Spell the word 'cat' backwards. Answer with the word only.",
    expect: "\\btac\\b",
    reference: "tac",
  },
  {
    prompt: "Sort these numbers from smallest to largest: 9, 2, 7. Answer with the numbers separated by commas.",
    expect: "2\\s*,\\s*7\\s*,\\s*9",
    reference: "2, 7, 9",
  },
  {
    prompt: json('with the keys "name" and "age" for a person named Ada who is 36 years old'),
    jsonKeys: ["name", "age"],
    expect: "ada[\\s\\S]*36|36[\\s\\S]*ada",
    reference: '{"name": "Ada", "age": 36}',
  },
  {
    prompt: json('with the keys "city" and "country" for the city of Paris'),
    jsonKeys: ["city", "country"],
    expect: "france",
    reference: '{"city": "Paris", "country": "France"}',
  },
  {
    prompt: json('with the key "primes" whose value is a list of the first three prime numbers'),
    jsonKeys: ["primes"],
    expect: "2\\s*,\\s*3\\s*,\\s*5",
    reference: '{"primes": [2, 3, 5]}',
  },
  {
    prompt: json('with the keys "x" and "y" set to the numbers 1 and 2'),
    jsonKeys: ["x", "y"],
    reference: '{"x": 1, "y": 2}',
  },
  {
    prompt: "Name the three colors of the French flag in exactly three words and nothing else.",
    words: 3,
    expect: "blue[\\s\\S]*white[\\s\\S]*red|bleu",
    reference: "Blue, white, red.",
  },
  {
    prompt: "Answer in exactly one word: what color is the sky on a clear day?",
    words: 1,
    expect: "\\bblue\\b",
    reference: "Blue.",
  },
  {
    prompt: "Name four fruits as a comma-separated list of exactly four words and nothing else.",
    words: 4,
    reference: "Apple, banana, cherry, mango",
  },
  {
    prompt: "Write the numbers one to five as words, separated by spaces, and nothing else.",
    words: 5,
    expect: "one\\s+two\\s+three\\s+four\\s+five",
    reference: "one two three four five",
  },
];

function digestOf(items: readonly AnswerItem[]): string {
  const checks = items.map(({ prompt, expect, jsonKeys, words }) => ({ prompt, expect, jsonKeys, words }));
  return createHash("sha256").update(JSON.stringify(checks)).digest("hex");
}

export const DEFAULT_ANSWER_SET: AnswerSet = {
  name: "default",
  items: [...DEFAULT_ANSWER_ITEMS],
  digest: digestOf(DEFAULT_ANSWER_ITEMS),
};

/**
 * A team's set: JSONL, one `{"prompt": ..., "expect": REGEX}` a line (blank lines skipped). Throws
 * one sentence naming the file, the line and what is wrong; `configPath` names where it was set.
 */
export function readAnswerSet(file: string, configPath: string): AnswerSet {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    throw new Error(`${configPath}: cannot read the answer set ${file}: ${(e as Error).message}`, { cause: e });
  }
  const items: AnswerItem[] = [];
  text.split("\n").forEach((line, i) => {
    if (line.trim() === "") return;
    const where = `${configPath}: ${file} line ${i + 1}`;
    let row: unknown;
    try {
      row = JSON.parse(line);
    } catch {
      throw new Error(`${where} is not JSON (one {"prompt": ..., "expect": ...} object a line)`);
    }
    const { prompt, expect, ...rest } = (row ?? {}) as Record<string, unknown>;
    if (typeof prompt !== "string" || prompt.trim() === "")
      throw new Error(`${where}: "prompt" must be a non-empty string`);
    if (typeof expect !== "string" || expect === "")
      throw new Error(`${where}: "expect" must be a non-empty regular expression`);
    const unknown = Object.keys(rest);
    if (unknown.length > 0)
      throw new Error(`${where}: unknown key(s) ${unknown.join(", ")} (only "prompt" and "expect")`);
    try {
      new RegExp(expect, "i");
    } catch (e) {
      throw new Error(`${where}: "expect" is not a regular expression: ${(e as Error).message}`, { cause: e });
    }
    items.push({ prompt, expect });
  });
  if (items.length === 0) throw new Error(`${configPath}: the answer set ${file} holds no prompt`);
  return { name: file, items, digest: digestOf(items) };
}

/** The visible answer: content without a `<think>` block that a server with no reasoning parser left in it. */
export function visibleAnswer(content: string): string {
  return content.replace(/<think>[\s\S]*?(<\/think>|$)/gi, "").trim();
}

/** The JSON object in an answer: fences and text around it allowed; null when none parses. */
function jsonObjectIn(answer: string): Record<string, unknown> | null {
  const start = answer.indexOf("{");
  const end = answer.lastIndexOf("}");
  if (start < 0 || end <= start) return null;
  try {
    const value = JSON.parse(answer.slice(start, end + 1)) as unknown;
    return value !== null && typeof value === "object" && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

export function wordCount(answer: string): number {
  return answer.split(/\s+/).filter((w) => /[\p{L}\p{N}]/u.test(w)).length;
}

/** Why a visible answer fails its item's checks; null when it passes. */
export function answerFailure(item: AnswerItem, answer: string): string | null {
  if (item.jsonKeys) {
    const obj = jsonObjectIn(answer);
    if (obj === null) return "no JSON object that parses";
    const missing = item.jsonKeys.filter((k) => !(k in obj));
    if (missing.length > 0) return `the JSON object lacks ${missing.map((k) => JSON.stringify(k)).join(", ")}`;
  }
  if (item.words !== undefined) {
    const n = wordCount(answer);
    if (n !== item.words) return `${n} words, not ${item.words}`;
  }
  if (item.expect !== undefined && !new RegExp(item.expect, "i").test(answer))
    return `does not match /${item.expect}/i`;
  return null;
}

/**
 * A repetition loop at the end of an answer: the same unit of 1 to 12 words (or 1 to 24 characters,
 * for text with no spaces) repeated back to back over at least 12 words (60 characters). What a
 * broken kernel or a degenerate draft produces until max_tokens; a right answer never does.
 */
export function repetitionLoop(text: string): string | null {
  const words = text.trim().split(/\s+/).filter(Boolean);
  const byWords = trailingPeriod(words, 12, 12);
  if (byWords !== null) return `the last ${byWords.run} words repeat "${words.slice(-byWords.period).join(" ")}"`;
  const chars = [...text.trim()];
  const byChars = trailingPeriod(chars, 24, 60);
  if (byChars !== null) return `the last ${byChars.run} characters repeat "${chars.slice(-byChars.period).join("")}"`;
  return null;
}

function trailingPeriod(units: string[], maxPeriod: number, minRun: number): { period: number; run: number } | null {
  for (let p = 1; p <= maxPeriod && 2 * p <= units.length; p++) {
    let run = p;
    for (let i = units.length - 1 - p; i >= 0 && units[i] === units[i + p]; i--) run++;
    if (run >= minRun && run >= 3 * p) return { period: p, run };
  }
  return null;
}
