/**
 * `gpuhost verify` and `gpuhost compare` against a real inference server this project did not
 * write: llama.cpp's llama-server with SmolLM2-135M-Instruct on the CPU (docs/real-server.md).
 */
import * as fs from "node:fs";
import * as http from "node:http";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { verifyMain } from "../../cli/verify";
import { compareMain } from "../../cli/compare";
import { io } from "../gate/cli-fixture";
import { cliFlags } from "../support/cli-flags";
import {
  freePort,
  metricAbove,
  MODEL_ALIAS,
  realServerSuite,
  smollm2AnswerFile,
  startLlamaServer,
  waitHealthy,
  type LlamaServer,
} from "./llama-server";
import { startTap } from "./timings-tap";

const suite = realServerSuite();
const { skip, server, onCleanup } = suite;

interface VerifyJson {
  ready: boolean;
  phase: string;
  elapsedSeconds: number;
  diagnosis: string | null;
  model: string | null;
  probe: { content: string } | null;
}

/** SmolLM2-135M answers 11 of the 24 shipped prompts (docs/answers.md); non-thinking budgets (it does not think). */
const SMOLLM2 = ["--answer-threshold", "0.3", "--thinking-off"];

/** A folder removed after the test: the answer file and the comparison's outputs. */
function testDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-real-gate-"));
  onCleanup(async () => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(skip)("gpuhost verify against llama.cpp's llama-server (a real server and model)", () => {
  it(
    "started before the server, says ready only after the server's first real generation",
    async () => {
      const port = await freePort();
      const out = io();
      const gate = verifyMain(
        // SmolLM2-135M answers 11 of the 24 shipped prompts (docs/answers.md): its threshold, not the story's 0.85.
        // The answer phase on four of them: the shipped set's score is answers.test.ts's subject.
        [
          ...["--endpoint", `http://127.0.0.1:${port}`, "--model", MODEL_ALIAS, "--deadline", "600", "--json"],
          ...SMOLLM2,
          ...["--answers", smollm2AnswerFile(testDir())],
        ],
        out,
      );
      let settled = false;
      void gate.then(() => (settled = true));
      await sleep(2_000);
      // Nothing listens yet: the gate waits, it neither fails nor passes.
      expect(settled).toBe(false);
      const startedAt = performance.now();
      const s = await server({ port });
      const code = await gate;
      const readyAfter = (performance.now() - startedAt) / 1000;
      expect(code, out.err() + out.out()).toBe(0);
      const r = JSON.parse(out.out()) as VerifyJson;
      expect(r.ready).toBe(true);
      expect(r.model).toBe(MODEL_ALIAS);
      expect(r.probe!.content.trim().length).toBeGreaterThan(0);
      // The server's own books: when the gate said ready, the server had generated tokens for it (they
      // reach the counter once the server has processed the probe's hang-up: metricAbove).
      expect(await metricAbove(s.url, "tokens_predicted_total", 0)).toBeGreaterThan(0);
      expect(s.log()).toMatch(/launch_slot_.*processing task/);
      // The gate's phases ran in order, from waiting for the port to the generations.
      expect(out.err()).toMatch(/connect[\s\S]*models[\s\S]*generate[\s\S]*stability[\s\S]*answers: answers checked/);
      console.log(
        `verify: ready ${readyAfter.toFixed(2)} s after llama-server was started; probe answered ${JSON.stringify(r.probe!.content)}`,
      );
    },
    600_000 /* the answer check on 2 CPU slots, a minute on a loaded machine */,
  );

  it("names the server SIGKILLed during the gate's first generation within seconds, not at the deadline", async () => {
    const s = await server({ parallel: 1 });
    await waitHealthy(s);
    // A long prompt: the server's prompt processing takes long enough for the kill to land inside
    // the generation (the kill follows the server's own log line that the task started).
    const prompt = `Summarize this text in one word: ${"the quick brown fox jumps over the lazy dog. ".repeat(160)}`;
    const out = io();
    const logFrom = s.log().length;
    const gate = verifyMain(["--endpoint", s.url, "--prompt", prompt, "--deadline", "600", "--json"], out);
    await s.waitForLog(/launch_slot_|processing task/, 120_000, logFrom);
    const killedAt = performance.now();
    s.child.kill("SIGKILL");
    const code = await gate;
    const namedAfter = (performance.now() - killedAt) / 1000;
    expect(await s.exited).toMatchObject({ signal: "SIGKILL" });
    expect(code).toBe(1);
    const r = JSON.parse(out.out()) as VerifyJson;
    expect(r.ready).toBe(false);
    expect(r.diagnosis).toMatch(/the server process went away during its first generation/);
    console.log(`verify: SIGKILL named after ${namedAfter.toFixed(2)} s: ${r.diagnosis}`);
    // Named by the gate's dead-server detection (3 s of refusals), not by its 600 s deadline.
    expect(namedAfter).toBeLessThan(30);
  }, 300_000);

  it("refuses a --model the server does not serve, naming what it serves (llama-server would answer any name)", async () => {
    const s = await server();
    await waitHealthy(s);
    const out = io();
    const code = await verifyMain(["--endpoint", s.url, "--model", "Qwen/Qwen3-8B", "--deadline", "60", "--json"], out);
    expect(code).toBe(1);
    const r = JSON.parse(out.out()) as VerifyJson;
    expect(r.phase).toBe("models");
    expect(r.diagnosis).toContain(`the server serves ["${MODEL_ALIAS}"], not the expected model "Qwen/Qwen3-8B"`);
  }, 120_000);
});

describe.skipIf(skip)("gpuhost compare against llama.cpp's llama-server", () => {
  it("starts the service through its activate command, waits for it to generate, measures it and recommends it", async () => {
    // The host's "systemctl start UNIT" stand-in: the control endpoint (re)starts llama-server on the
    // service port, as a unit restart would; the gate then waits for the new process to generate.
    const port = await freePort();
    let current: LlamaServer | null = null;
    const activations: string[] = [];
    const control = http.createServer((req, res) => {
      const unit = decodeURIComponent((req.url ?? "").replace(/^\/activate\//, ""));
      activations.push(unit);
      void (async () => {
        await current?.stop();
        current = await startLlamaServer(suite.install(), { port, parallel: 2 });
        res.end(`started ${unit}\n`);
      })();
    });
    await new Promise<void>((resolve) => control.listen(0, "127.0.0.1", resolve));
    onCleanup(async () => {
      await current?.stop();
      await new Promise((resolve) => control.close(resolve));
    });
    const controlUrl = `http://127.0.0.1:${(control.address() as { port: number }).port}/activate/{unit}`;
    const tap = await startTap(`http://127.0.0.1:${port}`);
    onCleanup(() => tap.close());

    const dir = testDir();
    const out = io();
    const code = await compareMain(
      cliFlags({
        endpoint: tap.url,
        activateCommand: `${process.execPath} ${path.join(__dirname, "activate.mjs")} ${controlUrl}`,
        services: "autoregressive",
        concurrency: "1,2",
        maxTokens: "48",
        mix: "chat=1",
        thinking: "off",
        answerThreshold: "0.3",
        // The gate's answer phase on four known-right facts: the shipped set is scored in answers.test.ts.
        answers: smollm2AnswerFile(dir),
        repeats: "2",
        // Two requests of 48 tokens per level on a shared CPU: repeats 53 and 83 tok/s apart were
        // rightly "unstable" at the default 25 %. This test proves the activation, the gate and the
        // recommendation; the tolerance itself is proved in test/gate/client-evidence.test.ts.
        changeTolerance: "0.9",
        requestsPerConcurrency: "2",
        completions: "1000",
        tokens: "48",
        cache: path.join(dir, "cache.json"),
        json: path.join(dir, "compare.json"),
      }),
      out,
    );
    expect(code, out.err() + out.out()).toBe(0);
    expect(activations).toEqual(["sglang-autoregressive.service"]);
    const r = JSON.parse(fs.readFileSync(path.join(dir, "compare.json"), "utf8")) as {
      comparison: { recommended: string } | null;
      services: {
        service: string;
        failure: string | null;
        sweep: { level: number; requests: number; errors: number; throughput: { mean: number } }[];
      }[];
    };
    expect(r.comparison?.recommended).toBe("autoregressive");
    const measured = r.services[0];
    expect(measured.failure).toBeNull();
    expect(measured.sweep.map((l) => l.level)).toEqual([1, 2]);
    for (const l of measured.sweep) {
      expect(l.errors, out.err() + JSON.stringify(l)).toBe(0);
      expect(l.throughput.mean).toBeGreaterThan(0);
    }
    // Every sweep request generated the 48 tokens asked for (ignore_eos), by the server's own count.
    const sweepRequests = measured.sweep.reduce((a, l) => a + l.requests, 0);
    const full = tap.completions.filter((c) => c.timings?.predicted_n === 48 && c.usage?.completion_tokens === 48);
    expect(full.length).toBeGreaterThanOrEqual(sweepRequests);
    console.log(`compare:\n${out.out()}`);
  }, 600_000);
});
