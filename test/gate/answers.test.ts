/**
 * Issue 43.2/43.3: the answer check, the gate's "answers" phase. Judged pure (loops, reasoning-only,
 * JSON, word counts, a team's JSONL set), against the simulator's answer table and its faults, and
 * against a server written here that answers fluently wrong with correct usage.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { verify } from "../../gate/readiness/verify";
import { DEFAULT_ANSWER_ITEMS, DEFAULT_ANSWER_SET, readAnswerSet, repetitionLoop } from "../../gate/base/answer-set";
import { answerAgreement, certifyAnswers, judgeAnswer } from "../../gate/readiness/answers";
import { startSim, type SimHandle } from "./sim-fixture";
import { fluentlyWrong } from "./answer-servers";
import { io } from "./cli-fixture";
import { verifyMain } from "../../cli/verify";

let closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers) await c();
  closers = [];
});

async function sim(faults: string[] = [], profile = "tiny"): Promise<SimHandle> {
  const s = await startSim({ faults, profile, timeScale: 20 });
  closers.push(() => s.close());
  return s;
}

const item = (i: number) => DEFAULT_ANSWER_ITEMS[i];
const find = (re: RegExp) => DEFAULT_ANSWER_ITEMS.find((x) => re.test(x.prompt))!;

describe("answer judgement", () => {
  it("ships at least 20 prompts: arithmetic, facts, JSON objects and word counts, each reference answer right", () => {
    expect(DEFAULT_ANSWER_ITEMS.length).toBeGreaterThanOrEqual(20);
    expect(DEFAULT_ANSWER_ITEMS.filter((x) => x.jsonKeys).length).toBeGreaterThanOrEqual(3);
    expect(DEFAULT_ANSWER_ITEMS.filter((x) => x.words !== undefined).length).toBeGreaterThanOrEqual(3);
    for (const x of DEFAULT_ANSWER_ITEMS) expect(judgeAnswer(x, x.reference!, "", "stop").why, x.prompt).toBeNull();
  });

  it("fails a wrong number, a JSON object that does not parse or lacks a key, and a wrong word count", () => {
    expect(judgeAnswer(item(0), "The answer is 43.", "", "stop").why).toMatch(/does not match/);
    expect(judgeAnswer(item(0), "17 + 25 = 42", "", "stop").right).toBe(true);
    expect(judgeAnswer(item(0), "420", "", "stop").right).toBe(false);
    const ada = find(/Ada/);
    expect(judgeAnswer(ada, '```json\n{"name": "Ada", "age": 36}\n```', "", "stop").right).toBe(true);
    expect(judgeAnswer(ada, '{"name": "Ada", age: 36}', "", "stop").why).toBe("no JSON object that parses");
    expect(judgeAnswer(ada, '{"name": "Ada", "years": 36}', "", "stop").why).toMatch(/lacks "age"/);
    const flag = find(/French flag/);
    expect(judgeAnswer(flag, "Blue, white, and red.", "", "stop").why).toBe("4 words, not 3");
  });

  it("names degenerate output: a repetition loop, everything in reasoning and nothing in content", () => {
    const loop = judgeAnswer(item(0), `42 ${"the the the ".repeat(10)}`, "", "length");
    expect(loop).toMatchObject({ right: false, degenerate: true });
    expect(loop.why).toMatch(/repetition loop: the last \d+ words repeat "the"/);
    expect(repetitionLoop("!".repeat(80))).toMatch(/characters repeat "!"/);
    expect(repetitionLoop("one two three four five six seven")).toBeNull();
    const thinking = judgeAnswer(item(0), "", "Let me think. 17 plus 25 ...", "length");
    expect(thinking).toMatchObject({ right: false, degenerate: true });
    expect(thinking.why).toMatch(/everything in reasoning and nothing in content/);
    // A <think> block left in content by a server with no reasoning parser is not the answer.
    expect(judgeAnswer(item(0), "<think>maybe 41</think>42", "", "stop").right).toBe(true);
  });

  it("reads a team's JSONL set and refuses a bad line naming the config path, the file and the line", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "gpuhost-answers-"));
    const good = path.join(dir, "set.jsonl");
    writeFileSync(
      good,
      '{"prompt": "Say just \'hello there\'", "expect": "hello"}\n\n{"prompt": "p", "expect": "x"}\n',
    );
    expect(readAnswerSet(good, "verification.answers.file").items).toHaveLength(2);
    const bad = path.join(dir, "bad.jsonl");
    writeFileSync(bad, '{"prompt": "p", "expect": "x"}\n{"prompt": "p", "expect": "("}\n');
    expect(() => readAnswerSet(bad, "verification.answers.file")).toThrow(
      /^verification\.answers\.file: .*bad\.jsonl line 2: "expect" is not a regular expression/,
    );
    writeFileSync(bad, '{"prompt": "p", "answer": "x"}\n');
    expect(() => readAnswerSet(bad, "verification.answers.file")).toThrow(/line 1: "expect" must be/);
  });

  it("compares a speculative service's greedy answers with the autoregressive service's: exact-match rate and both scores", () => {
    const right = DEFAULT_ANSWER_ITEMS.map((x) => judgeAnswer(x, x.reference!, "", "stop"));
    const half = DEFAULT_ANSWER_ITEMS.map((x, i) =>
      judgeAnswer(
        x,
        i % 2 ? DEFAULT_ANSWER_ITEMS[(i + 1) % DEFAULT_ANSWER_ITEMS.length].reference! : x.reference!,
        "",
        "stop",
      ),
    );
    const ar = certifyAnswers(DEFAULT_ANSWER_SET, right, 0.85);
    const spec = certifyAnswers(DEFAULT_ANSWER_SET, half, 0.4);
    const agreement = answerAgreement(spec, ar);
    expect(agreement.exactMatchRate).toBe(0.5);
    expect(agreement).toMatchObject({ speculativeScore: 0.5, autoregressiveScore: 1, worse: true });
    expect(answerAgreement(ar, ar)).toMatchObject({ exactMatchRate: 1, worse: false });
  });
});

describe("the answers phase of the gate", () => {
  it("the simulator answers the shipped set right by default: ready, with an answer certificate", async () => {
    const s = await sim();
    const r = await verify({ url: s.url, model: "tiny" }, { deadlineSeconds: 60 });
    expect(r.diagnosis).toBeNull();
    expect(r.phases.map((p) => p.phase)).toContain("answers");
    expect(r.answers).toMatchObject({ checked: true, passed: true, prompts: DEFAULT_ANSWER_ITEMS.length });
    expect(r.answers.right).toBe(DEFAULT_ANSWER_ITEMS.length);
    expect(r.answers.note).toMatch(/^answers checked: 24 of 24 right/);
  });

  it("wrong-answers (fluent, wrong, counters correct): not ready, in phase answers, the threshold's config path named", async () => {
    const s = await sim(["wrong-answers"]);
    const r = await verify({ url: s.url, model: "tiny" }, { deadlineSeconds: 60 });
    expect(r.ready).toBe(false);
    expect(r.phase).toBe("answers");
    expect(r.diagnosis).toMatch(
      /the answers failed: 0 of 24 right \(score 0\.00\), under verification\.answers\.passThreshold 0\.85/,
    );
    expect(r.answers.passed).toBe(false);
  });

  it('"none" skips the check explicitly and says "answers not checked"', async () => {
    const s = await sim(["wrong-answers"]);
    const r = await verify({ url: s.url, model: "tiny" }, { deadlineSeconds: 60, answers: { file: "none" } });
    expect(r.ready).toBe(true);
    expect(r.phases.map((p) => p.phase)).not.toContain("answers");
    expect(r.answers).toMatchObject({ checked: false, passed: null });
    expect(r.answers.note).toMatch(/^answers not checked/);
  });

  it("a team's set: the stand-in answers only what it knows, so a set it cannot answer fails and one it can passes", async () => {
    const s = await sim();
    const dir = mkdtempSync(path.join(tmpdir(), "gpuhost-answers-"));
    const file = path.join(dir, "team.jsonl");
    writeFileSync(file, `${JSON.stringify({ prompt: "Say just 'hello there'", expect: "^hello there$" })}\n`);
    const ok = await verify({ url: s.url, model: "tiny" }, { deadlineSeconds: 60, answers: { file } });
    expect(ok.answers).toMatchObject({ checked: true, passed: true, set: file, prompts: 1 });
    writeFileSync(file, `${JSON.stringify({ prompt: "Name our product's codename.", expect: "bluefin" })}\n`);
    const no = await verify({ url: s.url, model: "tiny" }, { deadlineSeconds: 60, answers: { file } });
    expect(no.phase).toBe("answers");
    expect(no.diagnosis).toMatch(/0 of 1 right/);
  });
});

describe("a server written here that answers fluently wrong", () => {
  it("passes connect, models, generate and stability with usage, and fails the answers", async () => {
    const s = await fluentlyWrong();
    closers.push(s.close);
    const r = await verify({ url: s.url, model: "m" }, { deadlineSeconds: 30, requireUsage: true });
    expect(r.phases.map((p) => p.phase)).toEqual(["connect", "models", "generate", "stability", "answers"]);
    expect(r.ready).toBe(false);
    expect(r.diagnosis).toMatch(/phase "answers".*the answers failed: 0 of 24 right/);
    expect(r.diagnosis).toMatch(/got "The answer is 41\." \(does not match/);
  });
});

describe("gpuhost verify --answers and --answer-threshold", () => {
  it("none: ready, saying answers not checked; a missing file or a threshold of 2: usage errors before any request", async () => {
    const s = await sim(["wrong-answers"]);
    const none = io();
    expect(await verifyMain(["--endpoint", s.url, "--answers", "none"], none)).toBe(0);
    expect(none.out()).toMatch(/^ready: .*; answers not checked \(verification\.answers\.file is "none"\)$/m);
    const wrong = io();
    expect(await verifyMain(["--endpoint", s.url, "--answer-threshold", "0.5"], wrong)).toBe(1);
    expect(wrong.out()).toMatch(
      /the answers failed: 0 of 24 right \(score 0\.00\), under verification\.answers\.passThreshold 0\.5/,
    );
    const missing = io();
    expect(await verifyMain(["--endpoint", s.url, "--answers", "/nonexistent.jsonl"], missing)).toBe(2);
    expect(missing.err()).toMatch(/--answers: cannot read the answer set \/nonexistent\.jsonl/);
    const big = io();
    expect(await verifyMain(["--endpoint", s.url, "--answer-threshold", "2"], big)).toBe(2);
    expect(big.err()).toMatch(/--answer-threshold: .*<=1/);
  }, 60_000);
});
