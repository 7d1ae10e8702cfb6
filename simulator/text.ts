/**
 * What the simulated model "says". Tokens are whole words from fixed vocabularies, so that the
 * text of token i is a table lookup and its JSON form is precomputed: the streaming hot path never
 * calls JSON.stringify per token.
 */

const ANSWER_WORDS =
  " The answer follows from the data . In practice , a serving host must prove that it generates before it is called ready ; listing models proves nothing about the kernels that run on the first request . We measure throughput at several concurrency levels and plan capacity from the sustained figure".split(
    /(?= )/,
  );
const REASONING_WORDS =
  " Okay , the user asks a question . Let me think about what they want and check each step carefully before I answer . First consider the request itself , then the constraints , then write a short reply".split(
    /(?= )/,
  );

export interface Vocabulary {
  words: string[];
  /** JSON string literals of `words`, quotes included. */
  json: string[];
}

function vocabulary(words: string[]): Vocabulary {
  return { words, json: words.map((w) => JSON.stringify(w)) };
}

export const ANSWER_VOCAB = vocabulary(ANSWER_WORDS);
export const REASONING_VOCAB = vocabulary(REASONING_WORDS);
/** garbled-answers: what a model says through broken kernels or a mismatched parser (other tokens, same count). */
export const GARBLED_VOCAB = vocabulary(
  " ̶ ĠĠ <unk> !! ĊĊ the the the ,, ]] assistant <|im_end|> ### 0 0 0".split(/(?= )/),
);

export function tokenIndex(vocab: Vocabulary, i: number): number {
  return i % vocab.words.length;
}

/** Text of tokens [from, to) of a vocabulary. */
export function vocabText(vocab: Vocabulary, from: number, to: number): string {
  let s = "";
  for (let i = from; i < to; i++) s += vocab.words[i % vocab.words.length];
  return s;
}

/** A tokenizer stand-in: about four characters a token, as for English BPE vocabularies. */
export function countTextTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

export interface ChatMessageLike {
  role?: unknown;
  content?: unknown;
}

/** Chat template overhead: a few tokens of role markers per message plus the generation prompt. */
export function countChatPromptTokens(messages: ChatMessageLike[]): number {
  let tokens = 3;
  for (const m of messages) tokens += 4 + countTextTokens(messageText(m));
  return tokens;
}

export function messageText(m: ChatMessageLike): string {
  if (typeof m.content === "string") return m.content;
  if (Array.isArray(m.content)) {
    return m.content
      .map((part: unknown) => (part && typeof part === "object" && "text" in part ? String(part.text) : ""))
      .join("");
  }
  return "";
}

/**
 * Prompts with one right answer, so that a readiness gate can check what came back: "Say just 'OK'",
 * "Reply with exactly X", "What is 17 + 25?". Returns the answer's tokens, or null for open prompts.
 */
export function knownAnswer(prompt: string): string[] | null {
  const say =
    /\b(?:say|reply with|respond with|answer with)\s+(?:just|only|exactly)?\s*[:]?\s*['"“‘`]([^'"”’`]{1,200})['"”’`]/i.exec(
      prompt,
    );
  if (say) return say[1].split(/(?= )/);
  const arithmetic = /what is\s+(-?\d{1,9})\s*([+\-*x×])\s*(-?\d{1,9})/i.exec(prompt);
  if (arithmetic) {
    const a = Number(arithmetic[1]);
    const b = Number(arithmetic[3]);
    const op = arithmetic[2];
    const value = op === "+" ? a + b : op === "-" ? a - b : a * b;
    return [String(value)];
  }
  return null;
}

/**
 * What a prompt is, as far as a draft model's acceptance cares: code (drafts predict syntax well),
 * random tokens (bench_serving's random dataset: text that is mostly not words), or chat.
 * A heuristic on the text, looked at only in its first 4,000 characters.
 */
export function classifyContent(text: string): "chat" | "code" | "random" {
  const head = text.slice(0, 4000);
  if (head.length === 0) return "chat";
  const words = head.split(/\s+/).filter(Boolean);
  const wordLike = words.filter((w) => /^[A-Za-z][a-z'-]*[.,;:!?)]*$/.test(w)).length;
  if (words.length >= 8 && wordLike / words.length < 0.35 && !/```|[{};]\s*$/m.test(head)) return "random";
  if (
    /```|\bdef \w+\(|\bfunction\b|\bclass \w+|=>|#include|\bimport \w+|\b(?:code|program|implement|refactor|bug|script|sql|query)\b/i.test(
      head,
    )
  )
    return "code";
  return "chat";
}
