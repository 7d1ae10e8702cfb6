/**
 * The readiness gate against the real simulator: each fault from the story gives the right outcome
 * and diagnosis, within the deadline plus one second.
 */
import { afterEach, describe, expect, it } from "vitest";
import { verify, type VerifyResult } from "../../gate/index";
import { startSim, tinyVariant, type SimHandle } from "./sim-fixture";

let sim: SimHandle | null = null;
afterEach(async () => {
  await sim?.close();
  sim = null;
});

async function gate(
  s: SimHandle,
  deadlineSeconds: number,
  policy: Record<string, unknown> = {},
): Promise<{ result: VerifyResult; wall: number; readyAt: number }> {
  const t0 = performance.now();
  const result = await verify(
    { url: s.url, model: "tiny" },
    { deadlineSeconds, ...policy },
    { serviceState: s.serviceState, serviceLogs: s.serviceLogs },
  );
  const readyAt = performance.now();
  return { result, wall: (readyAt - t0) / 1000, readyAt };
}

describe("verify against the simulator", () => {
  it("no fault: ready, with every phase timed and a real generation", async () => {
    sim = await startSim();
    const { result, wall } = await gate(sim, 10);
    expect(result.ready).toBe(true);
    expect(result.phase).toBe("ready");
    expect(result.diagnosis).toBeNull();
    expect(result.phases.map((p) => p.phase)).toEqual(["connect", "models", "generate", "stability", "answers"]);
    // The probe stops reading at the first visible answer token: a real answer, not only tokens.
    expect(result.probe!.content).toContain("OK");
    expect(result.probe!.timeToFirstAnswerSeconds).toBeGreaterThan(0);
    expect(wall).toBeLessThan(11);
  });

  it("late-port: waits through connection refused, ready only after the port opened", async () => {
    // Half a second of refused connections: several attempts at the gate's 100-250 ms retries.
    sim = await startSim({
      profile: tinyVariant({ load: { minSeconds: 0.5, maxSeconds: 0.5, warmupSeconds: 0.02 } }),
      faults: ["late-port"],
    });
    const { result, readyAt } = await gate(sim, 10);
    expect(result.ready).toBe(true);
    const opened = sim.logTime(/Uvicorn running/);
    expect(opened).not.toBeNull();
    expect(readyAt).toBeGreaterThan(opened!);
    expect(result.phases.find((p) => p.phase === "connect")!.attempts).toBeGreaterThan(1);
  });

  it("models-before-ready: /v1/models answering early is not ready; ready only once generation works", async () => {
    sim = await startSim({
      profile: tinyVariant({ load: { minSeconds: 1.5, maxSeconds: 1.5, warmupSeconds: 0.02 } }),
      faults: ["models-before-ready"],
    });
    const { result, readyAt } = await gate(sim, 10);
    expect(result.ready).toBe(true);
    const loaded = sim.logTime(/Load weight end/);
    expect(loaded).not.toBeNull();
    expect(readyAt).toBeGreaterThan(loaded!);
    // /v1/models answered long before: the gate spent the load in the generate phase.
    expect(result.phases.find((p) => p.phase === "generate")!.seconds).toBeGreaterThan(1);
  });

  it("models-before-ready with 503 for generations: retried until the model loaded", async () => {
    sim = await startSim({
      profile: tinyVariant({
        load: { minSeconds: 1, maxSeconds: 1, warmupSeconds: 0.02 },
        faultSettings: { modelsBeforeReady: { generationWhileLoading: "503" } },
      }),
      faults: ["models-before-ready"],
    });
    const { result, readyAt } = await gate(sim, 10);
    expect(result.ready).toBe(true);
    expect(readyAt).toBeGreaterThan(sim.logTime(/Load weight end/)!);
    expect(result.phases.find((p) => p.phase === "generate")!.attempts).toBeGreaterThan(1);
  });

  it("jit-crash: not ready; the diagnosis names the generate phase and carries the curand.h line from the logs", async () => {
    sim = await startSim({ faults: ["jit-crash"], timeScale: 10 });
    const deadline = 20;
    const { result, wall } = await gate(sim, deadline);
    expect(result.ready).toBe(false);
    expect(result.phase).toBe("generate");
    expect(result.diagnosis).toContain('phase "generate"');
    expect(result.diagnosis).toContain("fatal error: curand.h: No such file or directory");
    expect(result.diagnosis).toMatch(/failed|ECONNREFUSED|reset|socket/);
    expect(wall).toBeLessThan(deadline + 1);
  });

  it("jit-crash without a service check: not ready at the deadline, with the last error", async () => {
    sim = await startSim({ faults: ["jit-crash"], timeScale: 10 });
    const t0 = performance.now();
    const result = await verify({ url: sim.url, model: "tiny" }, { deadlineSeconds: 1.5 });
    const wall = (performance.now() - t0) / 1000;
    expect(result.ready).toBe(false);
    expect(result.phase).toBe("generate");
    expect(result.diagnosis).toContain("the deadline of 1.5 s passed");
    expect(result.lastError).toMatch(/ECONNREFUSED|socket|reset|closed/i);
    expect(wall).toBeLessThan(1.5 + 1);
  });

  it("oom-at-load: not ready, diagnosis carries CUDA out of memory", async () => {
    sim = await startSim({ faults: ["oom-at-load"], timeScale: 1 });
    const deadline = 15;
    const { result, wall } = await gate(sim, deadline);
    expect(result.ready).toBe(false);
    expect(["connect", "models"]).toContain(result.phase);
    expect(result.diagnosis).toContain("CUDA out of memory");
    expect(result.diagnosis).toContain("ActiveState=failed");
    expect(wall).toBeLessThan(deadline + 1);
  });

  it("slow-first-request: a JIT stall on the first generation is waited out, then ready", async () => {
    sim = await startSim({ faults: ["slow-first-request"], timeScale: 60 }); // 90 simulated s -> 1.5 s
    const { result } = await gate(sim, 15);
    expect(result.ready).toBe(true);
    expect(result.phases.find((p) => p.phase === "generate")!.seconds).toBeGreaterThan(1);
  });

  it("slow-first-request beyond the deadline: not ready, and the diagnosis names the request that never answered", async () => {
    sim = await startSim({ faults: ["slow-first-request"], timeScale: 1 });
    const { result, wall } = await gate(sim, 1);
    expect(result.ready).toBe(false);
    expect(result.phase).toBe("generate");
    expect(result.diagnosis).toContain(`POST ${sim.url}/v1/chat/completions (probe)`);
    expect(result.diagnosis).toContain("never answered");
    expect(wall).toBeLessThan(1 + 1);
  });

  it("thinking-budget: reasoning that spends all of max_tokens is no answer: not ready, at once, saying why", async () => {
    sim = await startSim({ faults: ["thinking-budget"] });
    const { result, wall } = await gate(sim, 10);
    expect(result.ready).toBe(false);
    expect(result.phase).toBe("generate");
    expect(result.diagnosis).toContain("reasoning used the whole max_tokens budget (1024)");
    expect(result.diagnosis).toContain("thinkingToggle");
    expect(wall).toBeLessThan(5);
  });

  it("thinking-budget with the thinking toggle: chat_template_kwargs turns thinking off and the answer comes", async () => {
    sim = await startSim({ faults: ["thinking-budget"] });
    const { result } = await gate(sim, 10, { thinkingToggle: true });
    expect(result.ready).toBe(true);
    expect(result.probe!.content).not.toBe("");
    expect(result.probe!.timeToFirstAnswerSeconds).toBeGreaterThan(0);
  });

  it("thinking-budget with a known answer: fails at once, saying reasoning used the budget", async () => {
    sim = await startSim({ faults: ["thinking-budget"] });
    const { result, wall } = await gate(sim, 10, { knownAnswer: "OK" });
    expect(result.ready).toBe(false);
    expect(result.phase).toBe("generate");
    expect(result.diagnosis).toContain("reasoning used the whole max_tokens budget");
    expect(wall).toBeLessThan(5);
  });

  it("reset-mid-stream: a short probe still verifies generation", async () => {
    sim = await startSim({ faults: ["reset-mid-stream"] });
    const { result } = await gate(sim, 10, { thinkingToggle: true });
    expect(result.ready).toBe(true);
  });

  it("reset-mid-stream cutting every generation (reasoning is longer than 2 tokens): never a false ready", async () => {
    sim = await startSim({
      profile: tinyVariant({ faultSettings: { resetMidStream: { afterTokens: 2, everyNth: 1 } } }),
      faults: ["reset-mid-stream"],
    });
    const { result, wall } = await gate(sim, 1);
    expect(result.ready).toBe(false);
    expect(result.phase).toBe("generate");
    expect(result.lastError).toMatch(/socket|reset|closed|terminated/i);
    expect(wall).toBeLessThan(2);
  });

  it("overload-500: one probe is below the threshold, ready", async () => {
    sim = await startSim({ faults: ["overload-500"] });
    const { result } = await gate(sim, 10);
    expect(result.ready).toBe(true);
  });

  it("overload-500 at threshold 0: every generation answers 500, not ready, diagnosis carries the 500", async () => {
    sim = await startSim({
      profile: tinyVariant({ faultSettings: { overload500: { threshold: 0 } } }),
      faults: ["overload-500"],
    });
    const { result, wall } = await gate(sim, 1);
    expect(result.ready).toBe(false);
    expect(result.phase).toBe("generate");
    expect(result.diagnosis).toContain("HTTP 500");
    expect(wall).toBeLessThan(2);
  });

  it("silent: accepts connections, never answers: not ready, phase models, the unanswered request named", async () => {
    sim = await startSim({ faults: ["silent"] });
    const { result, wall } = await gate(sim, 1);
    expect(result.ready).toBe(false);
    expect(result.phase).toBe("models");
    expect(result.diagnosis).toContain(`GET ${sim.url}/v1/models was sent`);
    expect(wall).toBeLessThan(2);
  });

  it("nothing listening: not ready in phase connect, connection refused", async () => {
    const t0 = performance.now();
    const result = await verify({ url: "http://127.0.0.1:9", model: "tiny" }, { deadlineSeconds: 1 });
    expect(result.ready).toBe(false);
    expect(result.phase).toBe("connect");
    expect(result.lastError).toContain("ECONNREFUSED");
    expect(result.diagnosis).toContain("last error: TCP connect to http://127.0.0.1:9: ");
    expect((performance.now() - t0) / 1000).toBeLessThan(2);
  });

  it("a model the server does not serve: fails at once in phase models, listing what is served", async () => {
    sim = await startSim();
    const result = await verify({ url: sim.url, model: "kimi-k2.6" }, { deadlineSeconds: 10 });
    expect(result.ready).toBe(false);
    expect(result.phase).toBe("models");
    expect(result.diagnosis).toContain('["tiny"]');
    expect(result.elapsedSeconds).toBeLessThan(5);
  });

  it("no model given: the first listed model is verified", async () => {
    sim = await startSim();
    const result = await verify({ url: `${sim.url}/v1/` }, { deadlineSeconds: 10 });
    expect(result.ready).toBe(true);
    expect(result.model).toBe("tiny");
  });
});
