/**
 * Issue 44: the client's own evidence is part of the one certificate. Servers written here lie the
 * ways a red-team run got certified with, each keeping its /metrics counters in step with its usage
 * so that reconciliation alone agrees: usage over max_tokens, one chunk per answer, empty 200s every
 * second request, a server that turns 4x slower mid-run (and mid-repeats). Each goes through
 * `gpuhost bench` as a user runs it, beside the honest control; the official `openai` client shows
 * what the liar's responses really hold.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { benchMain } from "../../cli/bench";
import { EXIT } from "../../cli/common";
import type { BenchResult } from "../../gate/run/bench";
import {
  certify,
  changeCheck,
  clientCheck,
  clientDelays,
  receivedCheck,
  type LevelEvidence,
} from "../../gate/judge/certificate";
import { CertificationSchema } from "../../gate/base/schema";
import type { RequestSample } from "../../gate/base/samples";
import { requestSample } from "./samples";
import { io } from "./cli-fixture";
import { loadServersClosedAfterEach } from "./load-servers";

const start = loadServersClosedAfterEach();
const POLICY = CertificationSchema.parse({});

const sample = (over: Partial<RequestSample>): RequestSample => requestSample(256, over);

describe("received: the tokens claimed against what the client received", () => {
  it("an honest stream passes, the counts named; speculative chunks of up to maxTokensPerChunk tokens pass", () => {
    expect(receivedCheck([sample({}), sample({})], POLICY)).toEqual({
      name: "received",
      ok: true,
      detail: "512 tokens claimed, 512 output chunks (2,048 characters) received over 2 requests",
    });
    // DFlash's block of 16 in one event
    expect(receivedCheck([sample({ outputChunks: 16, answerChunks: 16 })], POLICY).ok).toBe(true);
  });
  it("usage over max_tokens, or more tokens than chunks could carry: named with how many requests", () => {
    const over = receivedCheck([sample({ completionTokens: 512, outputChunks: 256 }), sample({})], POLICY);
    expect(over.ok).toBe(false);
    expect(over.detail).toMatch(
      /^the usage claimed tokens the client never received: 1 of 2 requests claimed more tokens than max_tokens asked for \(512 for 256\)/,
    );
    const one = receivedCheck([sample({ outputChunks: 1, outputCharacters: 1 })], POLICY);
    expect(one.detail).toMatch(
      /1 of 1 requests claimed more than 16 tokens per output chunk received \(256 tokens in 1\)/,
    );
  });
  it("a level where every request failed received nothing: never certified, though 0 reconciles with 0", () => {
    const failed = [sample({ error: "HTTP 500 overloaded", completionTokens: 0 })];
    expect(receivedCheck(failed, POLICY)).toMatchObject({
      ok: false,
      detail: "every request failed (1 of 1): nothing was received to certify",
    });
    const counters = {
      ok: true as const,
      snapshot: {
        dialect: "sglang" as const,
        generatedTokens: 0,
        promptTokens: 0,
        requests: 0,
        generatedByModel: { m: 0 },
        processStartSeconds: null,
        heldRequests: null,
      },
    };
    const evidence = {
      before: counters,
      after: { ...counters, snapshot: { ...counters.snapshot, requests: 0 } },
      client: { wallSeconds: 1, loopDelayP99Ms: 0, loopDelayMaxMs: 0, stallShare: 0, cpuShare: 0.1 },
      warm: true,
      model: "m",
      timeScale: 1,
      acceptanceFloor: null,
    } as unknown as LevelEvidence;
    const schedule = { planned: null, sent: null, lagP50: null, lagP99: null, runSeconds: 1 };
    const c = certify(
      { mode: "closed", level: 1, samples: failed, runs: [{ samples: failed }], schedule, maxTokens: 256 },
      evidence,
      POLICY,
    );
    expect(c.certified).toBe(false);
    expect(c.checks.find((x) => x.name === "received")?.ok).toBe(false);
  });
});

describe("steady: a server that changed during the run, and repeats that disagree", () => {
  const run = (tokensPerSecond: number, seconds: number) => ({ tokensPerSecond, seconds });
  it("the first level measured again: a drop beyond the tolerance is a slowdown, never a knee", () => {
    const bracket = { name: "C=4", first: run(1138, 10), again: run(290, 10) };
    expect(changeCheck([run(1138, 10)], bracket, POLICY, 1)).toEqual({
      ok: false,
      detail: "the server slowed down during the run (C=4: 1,138 -> 290 tok/s): a changing server, not a knee",
    });
    expect(changeCheck([], { ...bracket, first: run(290, 10), again: run(1138, 10) }, POLICY, 1).detail).toMatch(
      /^the server sped up during the run \(C=4: 290 -> 1,138 tok\/s\)/,
    );
    // within the tolerance: the bracket is named beside the steady check's detail
    expect(changeCheck([], { ...bracket, again: run(1100, 10) }, POLICY, 1)).toEqual({
      ok: true,
      detail: "; measured again after the sweep, C=4: 1,138 -> 1,100 tok/s",
    });
  });
  it("repeats beyond the tolerance are unstable; a gap under half a second of wall time is the client's noise", () => {
    expect(changeCheck([run(1138, 4), run(290, 4)], undefined, POLICY, 1)).toEqual({
      ok: false,
      detail: "unstable: its 2 repeats measured 1,138, 290 tok/s, more than 25 % apart: no mean of them is a figure",
    });
    // a 0.3 s level 40 % slower once: 0.12 s of a loaded machine's scheduler, not the server
    expect(changeCheck([run(1000, 0.3), run(600, 0.3)], undefined, POLICY, 1).ok).toBe(true);
    // the same at a time scale of 10: host seconds are a tenth of them on the wall clock
    expect(changeCheck([run(1000, 4), run(600, 4)], undefined, POLICY, 10).ok).toBe(true);
  });
});

describe("client: the client's own delays, measured from its samples", () => {
  /** C slots, each sending `perSlot` requests of 1 s, the next GAP s after its last ended; the window WINDOW s. */
  const closed = (c: number, perSlot: number, gap: number) =>
    Array.from({ length: c * perSlot }, (_, i) =>
      sample({ startedAtSeconds: Math.floor(i / c) * (1 + gap), e2eSeconds: 1 }),
    );
  const seen = { wallSeconds: 10, loopDelayP99Ms: 1, loopDelayMaxMs: 2, stallShare: 0, cpuShare: 0.1 };

  it("the window's excess over the requests' span and the slots' idle time between requests", () => {
    // 4 slots x 10 requests, 0.1 s between a request's end and the slot's next: 9 gaps per slot
    const samples = closed(4, 10, 0.1);
    const d = clientDelays([{ samples, durationSeconds: 10.9 + 0.5 }], "closed", 4);
    expect(d.excessSeconds).toBeCloseTo(0.5);
    expect(d.idleSeconds).toBeCloseTo(0.9);
    expect(d.windowSeconds).toBeCloseTo(11.4);
    // an open loop's window opens before its first arrival by design: no excess is charged
    expect(clientDelays([{ samples, durationSeconds: 20 }], "open", 4).excessSeconds).toBe(0);
  });

  it("delays beyond the stated share (1 %) fail the client check; within it they are named", () => {
    const tight = clientDelays([{ samples: closed(4, 10, 0.001), durationSeconds: 10.01 }], "closed", 4);
    const ok = clientCheck(seen, POLICY, [], { delays: tight, timeScale: 1 });
    expect(ok.ok, ok.detail).toBe(true);
    expect(ok.detail).toMatch(
      /; client delays: the window 1 ms past the requests' span \(0\.0 %\), slots idle 0\.1 % between a request's end and their next; token lag not measured \(the server stated no Server-Timing\)$/,
    );
    const slow = clientDelays([{ samples: closed(4, 10, 0.1), durationSeconds: 11.4 }], "closed", 4);
    const bad = clientCheck(seen, POLICY, [], { delays: slow, timeScale: 1 });
    expect(bad.ok).toBe(false);
    expect(bad.detail).toMatch(
      /client delays: the window 500 ms past the requests' span \(4\.4 %\), slots idle 7\.9 % .*: they made the figure 12\.3 % late \(the window's excess 4\.4 %, the slots' idle time 7\.9 %\), over 1\.0 %: the figure measured the client's own delays$/,
    );
    // the same at a time scale of 100: 5 ms of wall time is noise
    expect(clientCheck(seen, POLICY, [], { delays: slow, timeScale: 100 }).ok).toBe(true);
  });

  it("the lag behind a server that stated its own timing: the figure's lateness summed, the first token's held apart", () => {
    // 4 requests of 2 s at the server, read 15 ms (first token) and 30 ms (last) after it wrote them
    const timed = (lastLag: number) =>
      Array.from({ length: 4 }, (_, i) =>
        sample({
          startedAtSeconds: i,
          ttftSeconds: 0.015 + 0.001,
          e2eSeconds: 2 + lastLag + 0.002,
          serverTiming: { firstTokenSeconds: 0.001, lastTokenSeconds: 2, clientLastTokenSeconds: 2 + lastLag },
        }),
      );
    const d = clientDelays([{ samples: timed(0.03) }], "closed", 4);
    expect(d).toMatchObject({ timedRequests: 4, serverSeconds: 8 });
    expect(d.firstTokenLagSeconds).toBeCloseTo(0.06);
    expect(d.lastTokenLagSeconds).toBeCloseTo(0.12);
    const late = clientCheck(seen, POLICY, [], { delays: d, timeScale: 1 });
    expect(late.ok).toBe(false);
    expect(late.detail).toMatch(
      /; the first token read 15 ms after the server wrote it \(0\.8 % of its request time\), the last 30 ms \(1\.5 %; means of 4 requests the server timed\): they made the figure 1\.5 % late \(the last token's lag 1\.5 %\), over 1\.0 %: the figure measured the client's own delays$/,
    );
    // 10 ms of lag or less is noise, whatever share of a short request it is; a failed request is not timed
    const quick = clientDelays([{ samples: [...timed(0.009), sample({ error: "HTTP 500" })] }], "closed", 4);
    expect(quick.timedRequests).toBe(4);
    expect(clientCheck(seen, POLICY, [], { delays: quick, timeScale: 1 }).ok).toBe(true);
    // the first token's lag alone, over the fraction
    const firstLate = clientDelays([{ samples: timed(0).map((s) => ({ ...s, ttftSeconds: 0.2 })) }], "closed", 4);
    expect(clientCheck(seen, POLICY, [], { delays: firstLate, timeScale: 1 }).detail).toMatch(
      /: the first token's lag was 10\.0 % of the server's request time, over 1\.0 %/,
    );
  });
});

const argv = (url: string, file: string, ...more: string[]) => [
  ...["--endpoint", url, "--model", "m", "--max-tokens", "64", "--prompts", "1"],
  ...["--requests-per-concurrency", "2", "--json", file, ...more],
];
const jsonFile = () => path.join(mkdtempSync(path.join(tmpdir(), "gpuhost-evidence-")), "b.json");
const run = async (url: string, ...more: string[]) => {
  const file = jsonFile();
  const o = io();
  const code = await benchMain(argv(url, file, ...more), o);
  return { code, o, json: JSON.parse(readFileSync(file, "utf8")) as BenchResult };
};

describe("gpuhost bench against servers whose counters agree with their lies (issue 44's table)", () => {
  it("the honest control: three levels and the bracket, every level certified, exit 0", async () => {
    // 10 ms between chunks: a loaded machine's late timers are a small share of each answer; 32 of
    // them: a level well under a second and a half, where the event loop's stalls on the loaded
    // 2-core machine (a third of a level at times) stay under the client check's noise floor
    const server = await start({ tokens: 32, chunkMs: 10 });
    const { code, json } = await run(server.url, "--concurrency", "4,8,16");
    expect(code, JSON.stringify(json.sweep.map((l) => l.certificate))).toBe(EXIT.ok);
    expect(json.sweep.map((l) => l.certificate?.certified)).toEqual([true, true, true]);
    const steady = json.sweep[0].certificate!.checks.find((c) => c.name === "steady")!;
    expect(steady.detail).toMatch(/; measured again after the sweep, C=4: [\d,]+ -> [\d,]+ tok\/s$/);
    expect(json.sweep[0].certificate!.checks.find((c) => c.name === "received")!.detail).toBe(
      "256 tokens claimed, 256 output chunks (768 characters) received over 8 requests",
    );
    expect(json.sustainedOutputTokensPerSecond).toBeGreaterThan(0);
  }, 60_000);

  it("usage claiming twice max_tokens, counters in step: reconciled, yet not certified by 'received', exit 5", async () => {
    const server = await start({ tokens: 64, chunkMs: 1, usageClaims: 2, countClaimed: true });
    const { code, o, json } = await run(server.url, "--concurrency", "4");
    expect(code).toBe(EXIT.uncertified);
    const checks = json.sweep[0].certificate!.checks;
    expect(checks.find((c) => c.name === "reconciled")!.ok).toBe(true);
    expect(o.out()).toMatch(
      /^4\s.* {2}not certified: received: the usage claimed tokens the client never received: 8 of 8 requests claimed more tokens than max_tokens asked for \(128 for 64\)/m,
    );
    expect(json.sustainedOutputTokensPerSecond).toBe(0);
    expect(json.uncertifiedLevels).toEqual([4]);
  }, 60_000);

  it("one chunk per answer, usage 64: not certified by 'received' (64 tokens in 1 chunk), exit 5; even with --certify report no figure", async () => {
    const server = await start({ tokens: 64, chunkMs: 1, oneChunk: true, countClaimed: true });
    const { code, o, json } = await run(server.url, "--concurrency", "4");
    expect(code).toBe(EXIT.uncertified);
    expect(o.out()).toMatch(
      /not certified: received: .*8 of 8 requests claimed more than 16 tokens per output chunk received \(64 tokens in 1\)/,
    );
    expect(json.sustainedOutputTokensPerSecond).toBe(0);
    // certificates only reported: tokens never received are still no figure
    const report = await run(server.url, "--concurrency", "4", "--certify", "report");
    expect(report.json.sustainedOutputTokensPerSecond).toBe(0);
    expect(report.code).not.toBe(EXIT.ok);

    // the official client sees the same response: one chunk "x", usage claiming 64 tokens
    const openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "none", maxRetries: 0 });
    // ignore_eos is SGLang's extension, not in the client's types: the body is passed as the server reads it
    const body = {
      model: "m",
      messages: [{ role: "user" as const, content: "hi" }],
      max_tokens: 64,
      stream: true as const,
      stream_options: { include_usage: true },
      ignore_eos: true,
    };
    const stream = await openai.chat.completions.create(body);
    let text = "";
    let usage = 0;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      usage = chunk.usage?.completion_tokens ?? usage;
    }
    expect({ text, usage }).toEqual({ text: "x", usage: 64 });
  }, 60_000);

  it("an empty 200 every second request (no choices, nothing streamed, usage 64): failed requests, not reasoning", async () => {
    const server = await start({ tokens: 64, chunkMs: 1, emptyEvery: 2, countClaimed: true });
    const { code, json } = await run(server.url, "--concurrency", "4");
    expect(code).toBe(EXIT.errorBudget);
    const level = json.sweep[0];
    expect(level.errors).toBe(4);
    expect(level.errorExamples[0]).toMatch(/^HTTP 200 with nothing streamed .*: a failed request$/);
    expect(json.sustainedOutputTokensPerSecond).toBe(0);
    // the single request was the 1st: honest; the warmup answers in full (not a benchmark request)
    expect(json.singleRequest[0].errors).toBe(0);
    // within a budget that allows them, the honest half is what was received, and it is certified
    const allowed = await run(server.url, "--concurrency", "4", "--error-budget", "0.6");
    expect(allowed.json.sweep[0].certificate?.certified).toBe(true);
    expect(allowed.json.sweep[0].certificate!.checks.find((c) => c.name === "received")!.detail).toMatch(
      /^256 tokens claimed, 256 output chunks/,
    );
  }, 60_000);

  it("4x slower after its first levels: the sweep is not certified ('the server slowed down during the run'), never saturation, exit 5", async () => {
    // benchmark requests: 1 single, C=4's 8, C=8's 16; C=16's 32 and the bracket's 8 are slow
    const server = await start({ tokens: 64, chunkMs: 10, slowAfter: 25, slowFactor: 4 });
    const { code, o, json } = await run(server.url, "--concurrency", "4,8,16");
    expect(code, o.out()).toBe(EXIT.uncertified);
    expect(json.saturated).toBe(false);
    expect(json.sustainedOutputTokensPerSecond).toBe(0);
    expect(json.uncertifiedLevels).toEqual([4, 8, 16]);
    // every level's steady check says so (on a loaded machine a level may fail another check beside it)
    for (const level of json.sweep)
      expect(level.certificate!.checks.find((c) => c.name === "steady")!.detail).toMatch(
        /^the server slowed down during the run \(C=4: [\d,]+ -> [\d,]+ tok\/s\): a changing server, not a knee$/,
      );
    // C=4 may be named with a check a loaded machine failed beside steady ("C=4 not certified: client: ...")
    expect(json.saturationVerdict).toMatch(/^no level was certified \(C=4\b.*the server slowed down during the run/);
    expect(json.saturationVerdict).not.toMatch(/saturation at/);
  }, 60_000);

  it("slower from its second repeat: the level's repeats are unstable, not averaged into a mean, exit 5", async () => {
    // 1 single, then the first run's 8 fast, the second run's 8 slow
    const server = await start({ tokens: 64, chunkMs: 10, slowAfter: 9, slowFactor: 4 });
    const { code, json } = await run(server.url, "--concurrency", "4", "--repeats", "2");
    expect(code).toBe(EXIT.uncertified);
    expect(certText(json)).toMatch(
      /steady: unstable: its 2 repeats measured [\d,]+, [\d,]+ tok\/s, more than 25 % apart/,
    );
    expect(json.sustainedOutputTokensPerSecond).toBe(0);
  }, 60_000);
});

const certText = (json: BenchResult) =>
  json.sweep[0]
    .certificate!.checks.filter((c) => !c.ok)
    .map((c) => `${c.name}: ${c.detail}`)
    .join("; ");
