/**
 * Issue 27.4: the model's own health as drift. VerifiedGeneration's create records the greedy answer
 * to a reference prompt, the single-stream decode speed and (speculative) the acceptance length;
 * each refresh (read) measures them again. A changed answer or a collapsed acceptance is drift that
 * names the field, diff replaces on it (the next `up` re-gates), the drift report names it and the
 * textfile carries the figures. Proved against the simulator with faults switched on while it runs,
 * and against tiny servers written here that misbehave the same way.
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { create, diff, read } from "../../components/verified-generation/provider";
import { outcomeOf, parseRefreshOutput, VERIFIED_GENERATION_TYPE } from "../../components/drift/report";
import { driftExposition } from "../../components/drift/metrics";
import {
  answerDifference,
  DECODE_PROBE_ATTEMPTS,
  DECODE_PROBE_STRETCHES,
  type HealthBaseline,
} from "../../gate/health/health";
import { startSimulator } from "../../simulator/index";
import { verificationInputs } from "./inputs";
import { loadProfile, withSpeculative } from "../../simulator/profile";

let closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers) await c();
  closers = [];
});

/**
 * A simulator whose faults file (switched on while it runs) is FILE. At time scale 10 the tiny
 * profile decodes 20,000 tok/s of wall time, too fast for a probe to time (the baseline's decode is
 * then null by design); at 1 it is timed.
 */
async function sim(speculative: boolean, timeScale = 10) {
  const dir = mkdtempSync(path.join(tmpdir(), "gpuhost-health-"));
  const faultsFile = path.join(dir, "faults");
  const tiny = loadProfile("tiny");
  const profile = speculative
    ? withSpeculative(tiny, { algorithm: "EAGLE3", draftModelPath: "sim/tiny-eagle3" })
    : withSpeculative(tiny, null);
  const s = await startSimulator({ profile, port: 0, timeScale, log: () => undefined, faultsFile });
  closers.push(() => s.close());
  // The simulator reads its faults file again at most every 200 ms; its acceptance gauge covers the
  // last 10 simulated seconds (1 s here): after 1.2 s the switch holds and the gauge is of what follows.
  const switchOn = async (fault: string) => {
    writeFileSync(faultsFile, `${fault}\n`);
    await new Promise((r) => setTimeout(r, 1200));
  };
  return { url: s.url, switchOn };
}

const SPECULATIVE = { algorithm: "EAGLE3", draftModelPath: "sim/tiny-eagle3", acceptanceFloor: 1.5 };

/** With the health check's own deadline, at time scale 10. */
function inputs(url: string, over: Record<string, unknown> = {}): Record<string, unknown> {
  return verificationInputs(url, {
    verifyPolicy: { deadlineSeconds: 20, health: { timeoutSeconds: 10 } },
    timeScale: 10,
    ...over,
  });
}

/** The engine's streamed refresh events for one VerifiedGeneration whose read returned PROPS. */
function refreshEvents(props: Record<string, unknown>, op: string): string {
  const urn = "urn:pulumi:sim::gpuhost::gpuhost:index:GpuServingHost$pulumi-nodejs:dynamic:Resource::sim-1-verified";
  const metadata = { op, urn, type: VERIFIED_GENERATION_TYPE, old: { outputs: props }, new: { outputs: props } };
  return [
    JSON.stringify({ resourcePreEvent: { metadata, planning: true } }),
    JSON.stringify({ resOutputsEvent: { metadata, planning: true } }),
    JSON.stringify({ summaryEvent: { result: "succeeded" } }),
  ].join("\n");
}

/** What `gpuhost drift` would report and write for a refresh that read PROPS (op from the provider's diff). */
async function checkOf(props: Record<string, unknown>, news: Record<string, unknown>) {
  const d = await diff("id", props, news);
  const report = parseRefreshOutput(refreshEvents(props, d.replaces.length > 0 ? "replace" : "same"), "sim");
  const text = await driftExposition(report, outcomeOf(report), { endedAtMs: 0, durationMs: 0 });
  return { diff: d, report, text, outcome: outcomeOf(report) };
}

describe("answerDifference: the bounded difference of two answers", () => {
  it("is 0 for the same words, the share of changed words otherwise, 1 for nothing in common", () => {
    expect(answerDifference("The answer follows", "The  answer follows ")).toBe(0);
    expect(answerDifference("a b c d e", "a b c d x")).toBeCloseTo(0.2);
    expect(answerDifference("a b c d", "a b")).toBeCloseTo(0.5);
    expect(answerDifference("a b", "x y")).toBe(1);
  });
});

describe("VerifiedGeneration health on the simulator (faults switched on while it runs)", () => {
  it("records the reference answer at create; a refresh after garbled-answers names health.answer, re-gates, and the textfile has answer_matches 0", async () => {
    const host = await sim(false, 1);
    const news = inputs(host.url, { timeScale: 1 });
    const created = await create(news);
    const outs = created.outs as Record<string, unknown>;
    const baseline = outs.healthBaseline as HealthBaseline;
    expect(baseline.answer.length).toBeGreaterThan(0);
    expect(baseline.decodeTokensPerSecond).toBeGreaterThan(0);

    const clean = await read(created.id, outs);
    expect(clean.props.drift).toEqual([]);
    expect(clean.props.notChecked).toBeUndefined();
    const first = await checkOf(clean.props, news);
    expect(first.outcome).toBe("clean");
    expect(first.diff.replaces).toEqual([]);
    expect(first.text).toMatch(/gpuhost_service_answer_matches\{stack="sim",service="[^"]+"\} 1/);
    expect(first.text).toMatch(/gpuhost_service_decode_tokens_per_second\{stack="sim",service="[^"]+"\} \d/);
    expect(first.text).toMatch(/gpuhost_service_decode_tokens_per_second_baseline\{/);

    await host.switchOn("garbled-answers");
    const garbled = await read(created.id, clean.props);
    const drift = garbled.props.drift as { field: string; found: string; repair: string }[];
    // Garbled words also fail the answer check run again at the refresh (answer-health.ts).
    expect(drift.map((d) => d.field)).toEqual(["health.answer", "health.answerScore"]);
    expect(drift[0].found).toMatch(/kernels.*weights.*parser/);
    expect(drift[0].repair).toMatch(/next up verifies the service again/);
    const second = await checkOf(garbled.props, news);
    expect(second.diff.replaces).toContain("health");
    expect(second.outcome).toBe("drift");
    expect(second.report.services?.[0].drift.map((d) => d.field)).toEqual(["health.answer", "health.answerScore"]);
    expect(second.text).toMatch(/gpuhost_service_answer_matches\{stack="sim",service="[^"]+"\} 0/);
    expect(second.text).toMatch(/gpuhost_drift\{stack="sim",host="[^"]+",item="health.answer"\} 1/);
  }, 120_000);

  it("a speculative service: acceptance-collapse shows as health.acceptanceLength below the floor, and in the textfile", async () => {
    const host = await sim(true);
    const news = inputs(host.url, { speculative: SPECULATIVE });
    const created = await create(news);
    const outs = created.outs as Record<string, unknown>;
    const baseline = outs.healthBaseline as HealthBaseline;
    expect(baseline.acceptanceLength).toBeGreaterThan(1.5);
    const clean = await read(created.id, outs);
    expect(clean.props.drift).toEqual([]);

    await host.switchOn("acceptance-collapse");
    const collapsed = await read(created.id, clean.props);
    const drift = collapsed.props.drift as { field: string; found: string }[];
    expect(drift.map((d) => d.field)).toContain("health.acceptanceLength");
    expect(drift.find((d) => d.field === "health.acceptanceLength")?.found).toMatch(/^1\.00 tokens per verify step/);
    const check = await checkOf(collapsed.props, news);
    expect(check.outcome).toBe("drift");
    expect(check.diff.replaces).toContain("health");
    expect(check.text).toMatch(/gpuhost_service_acceptance_length\{stack="sim",service="[^"]+"\} 1\n/);
    expect(check.text).toMatch(/gpuhost_service_acceptance_floor\{stack="sim",service="[^"]+"\} 1.5/);
  }, 120_000);
});

/**
 * A tiny server written here: an OpenAI-compatible chat endpoint (streamed for the generation check
 * and the decode probe, JSON for the reference answer) and SGLang's /metrics. `answer(n)` is the
 * reference answer of the n-th reference request; `metrics` the Prometheus text (null: 404).
 */
async function tinyServer(opts: {
  answer: (n: number) => string;
  metrics: string | null;
  /** ms between tokens of the n-th decode probe (max_tokens DECODE_TOKENS); others: 2 ms. */
  decodeGapMs?: (n: number) => number;
  /** Every stream's tokens in one write: a decode no probe can time. */
  allAtOnce?: boolean;
  /** Records each streamed request's max_tokens. */
  seen?: number[];
  /** SGLang's native /generate: meta_info of a speculative request (absent: 404). */
  generateMeta?: { completion_tokens: number; spec_verify_ct: number };
}) {
  let references = 0;
  let decodes = 0;
  const server = http.createServer((req, res) => {
    let raw = "";
    req.on("data", (c: Buffer) => (raw += c.toString()));
    req.on("end", () => {
      if (req.url === "/metrics" && opts.metrics !== null) {
        res.writeHead(200, { "content-type": "text/plain" }).end(opts.metrics);
        return;
      }
      if (req.url === "/generate" && opts.generateMeta) {
        res
          .writeHead(200, { "content-type": "application/json" })
          .end(
            JSON.stringify({ text: " ok".repeat(opts.generateMeta.completion_tokens), meta_info: opts.generateMeta }),
          );
        return;
      }
      if (req.url !== "/v1/chat/completions") {
        res.writeHead(404).end();
        return;
      }
      const body = JSON.parse(raw) as { stream?: boolean; max_tokens?: number };
      if (body.stream !== true) {
        const content = opts.answer(++references);
        res.writeHead(200, { "content-type": "application/json" }).end(
          JSON.stringify({
            choices: [{ message: { content }, finish_reason: "length" }],
            usage: { completion_tokens: 8 },
          }),
        );
        return;
      }
      // Streamed: max_tokens one-word chunks, 2 ms apart, then usage.
      res.writeHead(200, { "content-type": "text/event-stream" });
      const n = Math.min(body.max_tokens ?? 16, 1024);
      opts.seen?.push(body.max_tokens ?? 16);
      const chunk = `data: ${JSON.stringify({ model: "m", choices: [{ delta: { content: " ok" } }] })}\n\n`;
      const end =
        `data: ${JSON.stringify({ model: "m", choices: [{ delta: {}, finish_reason: "length" }] })}\n\n` +
        `data: ${JSON.stringify({ model: "m", choices: [], usage: { prompt_tokens: 5, completion_tokens: n } })}\n\ndata: [DONE]\n\n`;
      if (opts.allAtOnce) {
        res.end(chunk.repeat(n) + end);
        return;
      }
      const gap = body.max_tokens === DECODE_TOKENS ? (opts.decodeGapMs?.(++decodes) ?? 2) : 2;
      let i = 0;
      const tick = setInterval(() => {
        if (i < n) {
          res.write(chunk);
          i++;
          return;
        }
        clearInterval(tick);
        res.end(end);
      }, gap);
      res.on("close", () => clearInterval(tick));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  closers.push(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A state as create leaves it, with the baseline given (the tiny servers are never benchmarked). */
function recorded(url: string, baseline: Partial<HealthBaseline>, over: Record<string, unknown> = {}) {
  const news = inputs(url, { verifyPolicy: { health: { timeoutSeconds: 5 } }, timeScale: 1, ...over });
  const healthBaseline: HealthBaseline = {
    referencePrompt: "In two sentences, explain why a serving host must prove that it generates.",
    referenceMaxTokens: 32,
    answer: "The first answer of the tiny server",
    finishReason: "length",
    decodeTokensPerSecond: 1,
    acceptanceLength: null,
    acceptanceFloor: null,
    ...baseline,
  };
  return { news, props: { ...news, model: "m", generating: true, generationCheck: "ok", healthBaseline, drift: [] } };
}

/** A speculative service's state as create leaves it: acceptance 3.1 recorded, floor 1.5. */
const recordedSpeculative = (url: string) =>
  recorded(url, { acceptanceLength: 3.1, acceptanceFloor: 1.5 }, { speculative: SPECULATIVE });

/** The decode probe's length in the decode tests: not the generation check's 16, so the server tells them apart. */
const DECODE_TOKENS = 24;

describe("VerifiedGeneration health against tiny servers written here", () => {
  // Baseline 20 tok/s, floor 0.7 of it = 14 tok/s. A slow probe (150 ms a token) is about 7 tok/s; a
  // normal one (2 ms a token) stays far above the floor even with timers late on a loaded machine.
  const decodePolicy = { verifyPolicy: { health: { timeoutSeconds: 10, decodeProbeTokens: DECODE_TOKENS } } };
  // The slow probes' tests, at twice the speed (each probe 1.8 s, not 3.6): baseline 40 tok/s, floor
  // 28; a slow probe (75 ms a token) about 13 tok/s, a normal one (2 ms) far above 28 still.
  const FAST_BASELINE = 40;
  const SLOW_GAP_MS = 75;

  it("a decode probe slowed once (a moment of contention) is confirmed by another and is no drift", async () => {
    const gaps: number[] = [];
    const url = await tinyServer({
      answer: () => "The first answer of the tiny server",
      metrics: null,
      decodeGapMs: (n) => (gaps[n - 1] = n === 1 ? SLOW_GAP_MS : 2),
    });
    const { props } = recorded(url, { decodeTokensPerSecond: FAST_BASELINE }, decodePolicy);
    const got = await read("id", props);
    expect(got.props.drift).toEqual([]);
    // the slow probe was run again, once: the second was above the floor
    expect(gaps).toEqual([SLOW_GAP_MS, 2]);
  }, 60_000);

  it("a decode too fast to time (every token in one write) is stretched to the most a probe may ask for, then neither a figure nor drift nor 'not checked'", async () => {
    const seen: number[] = [];
    const url = await tinyServer({
      answer: () => "The first answer of the tiny server",
      metrics: null,
      allAtOnce: true,
      seen,
    });
    const { props } = recorded(url, { decodeTokensPerSecond: 20 }, decodePolicy);
    const got = await read("id", props);
    expect(got.props.drift).toEqual([]);
    expect(got.props.notChecked).toBeUndefined();
    expect((got.props.healthCheck as { decodeTokensPerSecond: number | null }).decodeTokensPerSecond).toBeNull();
    // After the generation check: the probe of DECODE_TOKENS, stretched up to the most a probe may
    // ask for, and none after it. Usually one stretch; in a loaded fresh-clone run the client read the
    // one write's 24 tokens 12.5 ms apart (a window, though no speed), and the probe went 24, 719, 1024.
    const probes = seen.slice(seen.indexOf(DECODE_TOKENS));
    expect(probes[0]).toBe(DECODE_TOKENS);
    expect(probes.at(-1)).toBe(1024);
    expect(probes.length).toBeLessThanOrEqual(1 + DECODE_PROBE_STRETCHES);
    for (let i = 1; i < probes.length; i++) expect(probes[i]).toBeGreaterThan(probes[i - 1]);
  }, 60_000);

  it("a first probe a stall made look slow is stretched again from the window the stretched one took: a speed, not 'too fast to time'", async () => {
    const seen: number[] = [];
    // The first probe: 24 tokens 8 ms apart (about 0.2 s, under the 0.25 s window), so it is stretched
    // to about 48 tokens, which the server then streams 2 ms apart (about 0.1 s): under the window again.
    const url = await tinyServer({
      answer: () => "The first answer of the tiny server",
      metrics: null,
      decodeGapMs: () => 8,
      seen,
    });
    const { props } = recorded(url, { decodeTokensPerSecond: 20 }, decodePolicy);
    const got = await read("id", props);
    expect(got.props.drift).toEqual([]);
    const probes = seen.slice(seen.indexOf(DECODE_TOKENS));
    // Three on a quiet machine; a loaded one can make a stretched probe take the window too, and then
    // it is stretched once more: each probe after the first longer than the one before it.
    expect(probes.length).toBeGreaterThanOrEqual(3);
    expect(probes.length).toBeLessThanOrEqual(1 + DECODE_PROBE_STRETCHES);
    for (let i = 2; i < probes.length; i++) expect(probes[i]).toBeGreaterThan(probes[i - 1]);
    expect((got.props.healthCheck as { decodeTokensPerSecond: number | null }).decodeTokensPerSecond).toBeGreaterThan(
      100,
    );
  }, 60_000);

  it("a decode every probe finds slow drifts on health.decodeTokensPerSecond after DECODE_PROBE_ATTEMPTS probes", async () => {
    let probes = 0;
    const url = await tinyServer({
      answer: () => "The first answer of the tiny server",
      metrics: null,
      decodeGapMs: () => (probes++, SLOW_GAP_MS),
    });
    const { news, props } = recorded(url, { decodeTokensPerSecond: FAST_BASELINE }, decodePolicy);
    const got = await read("id", props);
    const drift = got.props.drift as { field: string; found: string }[];
    expect(drift.map((d) => d.field)).toEqual(["health.decodeTokensPerSecond"]);
    expect(Number(/^([\d.]+) tok\/s/.exec(drift[0].found)?.[1])).toBeLessThan(FAST_BASELINE * 0.7);
    expect(probes).toBe(DECODE_PROBE_ATTEMPTS);
    expect((await checkOf(got.props, news)).outcome).toBe("drift");
  }, 60_000);

  it("a server whose greedy answer to the reference prompt changes on the second call drifts on health.answer", async () => {
    const url = await tinyServer({
      answer: (n) => (n === 1 ? "The first answer of the tiny server" : "Completely different words came back now"),
      metrics: null,
    });
    const { news, props } = recorded(url, {});
    const first = await read("id", props);
    expect(first.props.drift).toEqual([]);
    const second = await read("id", first.props);
    expect((second.props.drift as { field: string }[]).map((d) => d.field)).toEqual(["health.answer"]);
    expect((await checkOf(second.props, news)).outcome).toBe("drift");
  });

  it("a speculative server whose /metrics reports acceptance 1.0 drifts on health.acceptanceLength", async () => {
    const url = await tinyServer({
      answer: () => "The first answer of the tiny server",
      metrics: '# TYPE sglang:spec_accept_length gauge\nsglang:spec_accept_length{model_name="m"} 1.0\n',
    });
    const { news, props } = recordedSpeculative(url);
    const got = await read("id", props);
    expect((got.props.drift as { field: string }[]).map((d) => d.field)).toEqual(["health.acceptanceLength"]);
    const check = await checkOf(got.props, news);
    expect(check.outcome).toBe("drift");
    expect(check.text).toMatch(/gpuhost_service_acceptance_length\{stack="sim",service="[^"]+"\} 1\n/);
  });

  // The last CI's failure: the acceptance was read from the server-wide gauge, which is of whatever
  // decoded last (there, the decode probe's benchmark prompt at a lower acceptance than the chat
  // prompt the baseline was measured on), and a healthy service drifted.
  it("acceptance is the health's own /generate probe, not the gauge of whatever decoded last: a gauge at 2.0 beside a probe at 3.2 is no drift", async () => {
    const url = await tinyServer({
      answer: () => "The first answer of the tiny server",
      metrics: '# TYPE sglang:spec_accept_length gauge\nsglang:spec_accept_length{model_name="m"} 2.0\n',
      generateMeta: { completion_tokens: 256, spec_verify_ct: 80 },
    });
    const { news, props } = recordedSpeculative(url);
    const got = await read("id", props);
    expect(got.props.drift).toEqual([]);
    expect(got.props.notChecked).toBeUndefined();
    expect((got.props.healthCheck as { acceptanceLength: number }).acceptanceLength).toBeCloseTo(3.2, 5);
    expect((await checkOf(got.props, news)).outcome).toBe("clean");
  });

  it("a speculative server that reports no acceptance is not checked, not clean", async () => {
    const url = await tinyServer({ answer: () => "The first answer of the tiny server", metrics: null });
    const { news, props } = recordedSpeculative(url);
    const got = await read("id", props);
    expect(got.props.drift).toEqual([]);
    expect(got.props.notChecked).toMatch(/health not checked: acceptance: .*no speculative acceptance/);
    const check = await checkOf(got.props, news);
    expect(check.outcome).toBe("not-checked");
    // Nothing measured is written as a figure: an alert cannot read "not checked" as a collapse.
    expect(check.text).not.toMatch(/gpuhost_service_acceptance_length\{/);
  });
});
