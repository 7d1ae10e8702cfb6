/**
 * A small set of realistic prompts, written for this project: chat, code, and a long-context task
 * over a document. Speculative decoding is judged on prompts like these, not on random tokens,
 * which inflate acceptance (74.6 % vs 48.5 % in one report, lightseekorg/tokenspeed #1305).
 */

export const PROMPT_CATEGORIES = ["chat", "code", "long-context"] as const;
export type PromptCategory = (typeof PROMPT_CATEGORIES)[number];

/** Prompts that ask for long answers; ignore_eos keeps the length exact anyway. */
export const BENCH_PROMPTS = [
  "Write a detailed technical essay on how large language model inference servers batch requests.",
  "Explain, step by step and at length, how a CPU executes a program from power-on to a running shell.",
  "Write a long story about a lighthouse keeper who discovers a map of forgotten islands.",
  "Describe in depth the history of numerical weather prediction and its main algorithms.",
  "Write an extensive guide to brewing coffee with every common method, with reasons for each step.",
  "Explain the mathematics of attention in transformers thoroughly, with worked examples.",
  "Write a comprehensive tutorial on writing a compiler for a small language.",
  "Describe, in great detail, the life cycle of stars and the elements they produce.",
];

export const CHAT_PROMPTS = [
  "I am planning a three-day walking trip in the hills with two friends in late autumn. What should we pack, and how should we plan each day so that nobody is out after dark?",
  "My team keeps missing sprint deadlines even though everyone works long hours. How would you find out what is going wrong, and what would you change first?",
  "Explain to a curious twelve-year-old why the sky is blue during the day and red at sunset, then give two simple experiments we can do at home.",
  "Write a friendly but firm email to a landlord asking for a broken heater to be repaired this week, mentioning that it has been reported twice already.",
  "Compare renting and buying a flat for someone who expects to move cities in about four years. Walk through the main costs on each side.",
  "I want to get better at public speaking before a conference talk in six weeks. Give me a practice plan with concrete exercises for each week.",
  "Summarise the main arguments for and against a four-day working week, and say which evidence would settle the question.",
  "Help me write a short speech for my grandmother's ninetieth birthday: she was a nurse, loves gardening and still beats everyone at cards.",
];

export const CODE_PROMPTS = [
  "Write a Python function that merges overlapping time intervals given as (start, end) tuples, with tests for the edge cases.",
  "Implement an LRU cache in TypeScript with get and set in O(1), using a Map, and explain how eviction works in code comments.",
  "Here is a bug: a Go HTTP handler reads the request body twice and the second read is empty. Show the fixed code and explain the cause.",
  "Write a Bash script that rotates log files in a directory, keeping the last seven compressed copies, safe for file names with spaces.",
  "Refactor this JavaScript into async/await and add error handling: function load(u, cb) { fetch(u).then(r => r.json()).then(d => cb(null, d)); }",
  "Write a SQL query that returns, for each customer, the month with their highest total order value, and explain the window function used.",
  "Implement binary search on a sorted array of integers in Rust, returning the insertion point when the value is absent, with unit tests.",
  "Write a C function that reverses a singly linked list in place, and a small main program that builds a list, reverses it and prints it.",
];

const DOCUMENT_PARAGRAPHS = [
  "The harbour authority's annual report opens with the year's traffic. Container volumes rose by six per cent, driven by two new feeder services, while bulk cargo fell as the coal terminal wound down ahead of its planned closure.",
  "Staffing remained the authority's largest cost. Pilot numbers were increased by four to cut waiting times at the outer anchorage, which had reached eleven hours at peak in the previous winter.",
  "The dredging programme for the eastern channel was delayed by three months after sediment samples showed higher than expected levels of heavy metals, which required a different disposal site.",
  "Revenue from cruise calls recovered to its pre-pandemic level, although the board noted that passenger spending in the town centre had not followed, and commissioned a study of visitor flows.",
  "Energy use across the estate fell by nine per cent after the quay cranes were converted to regenerative drives and shore power was installed at two berths used by the ferry operator.",
  "Two safety incidents were reported to the regulator: a mooring line failure that injured a linesman, and a near miss between a pilot boat and a recreational vessel in poor visibility.",
  "The authority's long-term plan proposes reclaiming land to the south for an offshore wind assembly yard, subject to an environmental assessment and agreement with the fishing cooperative.",
  "Debt was refinanced at a fixed rate for fifteen years, and the board approved a dividend to the municipality for the first time in five years, while keeping a reserve for the dredging works.",
];

const LONG_CONTEXT_QUESTIONS = [
  "Using only the report above, list every risk to next year's budget that it mentions and say which one you consider largest, with reasons.",
  "From the report above, write a one-page briefing for a new board member: traffic, costs, projects, safety, and open decisions.",
  "Which figures in the report above would you ask the authority to explain further, and what question would you ask about each?",
];

/** About four characters a token, as for English BPE vocabularies (and the simulator's count). */
export const CHARS_PER_TOKEN = 4;

/**
 * A long-context prompt of about `tokens` tokens: the report (its paragraphs repeated, numbered as
 * sections, until long enough), then a question about it.
 */
export function longContextPrompt(tokens: number, index: number): string {
  const question = LONG_CONTEXT_QUESTIONS[index % LONG_CONTEXT_QUESTIONS.length];
  const target = Math.max(0, tokens * CHARS_PER_TOKEN - question.length - 40);
  const parts: string[] = [];
  let length = 0;
  for (let i = 0; length < target; i++) {
    const paragraph = `Section ${i + 1}. ${DOCUMENT_PARAGRAPHS[(i + index) % DOCUMENT_PARAGRAPHS.length]}`;
    parts.push(paragraph);
    length += paragraph.length + 2;
  }
  return `Annual report of the harbour authority:\n\n${parts.join("\n\n")}\n\n${question}`;
}

export function shippedPrompt(category: PromptCategory, index: number, promptTokens: number): string {
  switch (category) {
    case "chat":
      return CHAT_PROMPTS[index % CHAT_PROMPTS.length];
    case "code":
      return CODE_PROMPTS[index % CODE_PROMPTS.length];
    case "long-context":
      return longContextPrompt(promptTokens, index);
  }
}
