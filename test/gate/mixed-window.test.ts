/**
 * Issue 29.3: the batch class's figure in a mixed run is the tokens each request produced inside the
 * window (gate/run/mixed-run.ts windowTokens), not the requests that finished inside it: a
 * closed loop of equal requests started together stays in step, and its completions come in waves.
 */
import { describe, expect, it } from "vitest";
import { windowTokens } from "../../gate/run/mixed-run";
import type { RequestSample } from "../../gate/base/samples";

const request = (startedAtSeconds: number, ttftSeconds: number, e2eSeconds: number, tokens: number) =>
  ({ startedAtSeconds, ttftSeconds, e2eSeconds, completionTokens: tokens, error: null }) as RequestSample;

describe("the tokens a request produced inside the window", () => {
  it("spread evenly from its first token to its last; failed requests and those outside count nothing", () => {
    // first token at 1 s, last at 11 s: 1,000 tokens, 100 a second
    const r = request(0, 1, 11, 1000);
    expect(windowTokens(r, 0, 20)).toBe(1000);
    expect(windowTokens(r, 6, 20)).toBeCloseTo(500, 9);
    expect(windowTokens(r, 3, 5)).toBeCloseTo(200, 9);
    expect(windowTokens(r, 12, 20)).toBe(0);
    expect(windowTokens({ ...r, error: "HTTP 500" }, 0, 20)).toBe(0);
  });

  it("a loop of 64 slots in step (10 s requests of 1,000 tokens): the window holds the true rate, where counting completions does not", () => {
    // three waves: every slot's requests start at 0, 10 and 20 s
    const samples = [0, 10, 20].flatMap((t) => Array.from({ length: 64 }, () => request(t, 0, 10, 1000)));
    const [from, to] = [5, 19];
    const rate = samples.reduce((a, s) => a + windowTokens(s, from, to), 0) / (to - from);
    expect(rate).toBeCloseTo(6400, 6);
    const finished = samples.filter(
      (s) => s.startedAtSeconds + s.e2eSeconds >= from && s.startedAtSeconds + s.e2eSeconds <= to,
    );
    // one wave of 64 completions in 14 s: 4,571 tok/s, 29 % low
    expect((finished.length * 1000) / (to - from)).toBeCloseTo(4571.4, 1);
  });
});
