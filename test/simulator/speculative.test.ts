import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { run } from "../support/run";
import { sglangArgv, type SglangServerArgs } from "../../components/services/launch-args";
import { theoreticalLevel } from "../../simulator/perf-model";
import { loadProfile, withSpeculative } from "../../simulator/profile";
import { ArgparseError, KNOWN_FLAGS, parseSglangArgs, ServerArgsError } from "../../simulator/sglang-args";
import { profileFor } from "../../simulator/sglang";
import { chainAccept, solveAcceptRate } from "../../simulator/speculative";
import { classifyContent } from "../../simulator/text";
import { closeAll, derivedProfile, json, post, startTestSim } from "./helpers";

const ROOT = path.join(__dirname, "..", "..");
const STORY = "kimi-k2.6-8x-rtx-pro-6000";
const ar = loadProfile(STORY);
const eagle = loadProfile(`${STORY}-eagle3`);
const dflash = loadProfile(`${STORY}-dflash`);
const ratio = (spec: typeof ar, c: number, content: "chat" | "code" | "random" = "chat", promptTokens = 200) =>
  theoreticalLevel(spec, c, { content, promptTokens }).aggregateTokensPerSecond /
  theoreticalLevel(ar, c).aggregateTokensPerSecond;

afterEach(closeAll);

describe("speculative decoding model (published behaviour)", () => {
  it("chain acceptance: (1 - a^m) / (1 - a), and its inverse", () => {
    expect(chainAccept(0.5, 3)).toBeCloseTo(1.75, 12); // 1 + 0.5 + 0.25
    expect(chainAccept(0, 4)).toBe(1);
    expect(solveAcceptRate(1.75, 3)).toBeCloseTo(0.5, 9);
  });

  it("story host: EAGLE-3 accepts 3.2 at batch 1 (sglang PR #26506), ~100 tok/s single stream vs 42", () => {
    const one = theoreticalLevel(eagle, 1);
    expect(one.acceptLength!).toBeCloseTo(3.2, 6);
    expect(theoreticalLevel(ar, 1).aggregateTokensPerSecond).toBe(42);
    expect(one.aggregateTokensPerSecond).toBeGreaterThan(95);
    expect(one.aggregateTokensPerSecond).toBeLessThan(105);
  });

  it("DFlash: +18 % at concurrency 8 on short prompts, slower than autoregressive on 16k prompts (sglang PR #35784)", () => {
    expect(ratio(dflash, 8)).toBeGreaterThan(1.12);
    expect(ratio(dflash, 8)).toBeLessThan(1.24);
    expect(ratio(dflash, 8, "chat", 16384)).toBeLessThan(1);
  });

  it("gains fade with concurrency: EAGLE-3 crosses below autoregressive between 32 and 48, DFlash between 8 and 16", () => {
    const levels = [1, 2, 4, 8, 16, 32, 48, 64];
    for (const spec of [eagle, dflash]) {
      const r = levels.map((c) => ratio(spec, c));
      for (let i = 1; i < r.length; i++) expect(r[i]).toBeLessThan(r[i - 1]);
    }
    expect(ratio(eagle, 32)).toBeGreaterThan(1);
    expect(ratio(eagle, 48)).toBeLessThan(1);
    expect(ratio(dflash, 8)).toBeGreaterThan(1);
    expect(ratio(dflash, 16)).toBeLessThan(1);
  });

  it("content matters: random tokens overstate acceptance, code beats chat", () => {
    const chat = theoreticalLevel(eagle, 1, { content: "chat", promptTokens: 100 }).acceptLength!;
    const code = theoreticalLevel(eagle, 1, { content: "code", promptTokens: 100 }).acceptLength!;
    const random = theoreticalLevel(eagle, 1, { content: "random", promptTokens: 100 }).acceptLength!;
    expect(code).toBeGreaterThan(chat);
    expect(random).toBeGreaterThan(code);
    // At 64 concurrent, random prompts still show a gain that chat prompts do not have.
    expect(ratio(eagle, 64, "random")).toBeGreaterThan(1);
    expect(ratio(eagle, 64, "chat")).toBeLessThan(1);
    expect(classifyContent("Write a Python function that parses a CSV file.")).toBe("code");
    expect(classifyContent("What should I cook tonight for four friends?")).toBe("chat");
    expect(classifyContent("xq7 zzv 9a0k $%q0 @@1 pq9 t7r 00x1 -- ]]")).toBe("random");
  });

  it("draft settings matter: one EAGLE step accepts at most 2, more steps accept more but cost more", () => {
    const one = withSpeculative(ar, { algorithm: "EAGLE3", numSteps: 1, eagleTopk: 1, numDraftTokens: 2 });
    const five = withSpeculative(ar, { algorithm: "EAGLE3", numSteps: 5, eagleTopk: 1, numDraftTokens: 6 });
    expect(theoreticalLevel(one, 1).acceptLength!).toBeLessThan(2);
    expect(theoreticalLevel(five, 1).acceptLength!).toBeGreaterThan(3.2);
    // At 64 concurrent the longer draft loses more than the short one.
    expect(theoreticalLevel(five, 64).aggregateTokensPerSecond).toBeLessThan(
      theoreticalLevel(one, 64).aggregateTokensPerSecond,
    );
  });
});

const storyArgs: SglangServerArgs = {
  modelPath: "/models/moonshotai/Kimi-K2.6",
  servedModelName: "kimi-k2.6",
  tp: 8,
  host: "127.0.0.1",
  port: 30001,
  reasoningParser: "kimi_k2",
  toolCallParser: "kimi_k2",
  trustRemoteCode: true,
  memFractionStatic: 0.85,
  enableMetrics: true,
};

describe("stand-in sglang: SGLang's flags (python/sglang/srt/server_args.py)", () => {
  it("knows SGLang's spellings of the flags gpuhost renders", () => {
    for (const flag of [
      "--model-path",
      "--served-model-name",
      "--trust-remote-code",
      "--tp-size",
      "--mem-fraction-static",
      "--reasoning-parser",
      "--tool-call-parser",
      "--enable-metrics",
      "--speculative-algorithm",
      "--speculative-draft-model-path",
      "--speculative-num-steps",
      "--speculative-eagle-topk",
      "--speculative-num-draft-tokens",
      "--speculative-dflash-block-size",
    ])
      expect(KNOWN_FLAGS).toContain(flag);
  });

  it("parses every unit gpuhost renders for the story host, each with its own algorithm and settings", () => {
    // the credential systemd would hand over (%d/sglang-server-args.yaml), written as gpuhost writes it
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-cred-"));
    const credential = path.join(dir, "sglang-server-args.yaml");
    fs.writeFileSync(credential, '# written by gpuhost\napi-key: "KEY-from-file"\n');
    const words = (a: SglangServerArgs) => sglangArgv(a).map((w) => (typeof w === "string" ? w : credential));
    const plain = parseSglangArgs(words({ ...storyArgs, apiKeyCredential: "sglang-server-args.yaml" }));
    expect(plain).toMatchObject({ model_path: "/models/moonshotai/Kimi-K2.6", tp_size: 8, api_key: "KEY-from-file" });
    // as in SGLang: the command line wins over the file; a non-YAML file is refused
    expect(parseSglangArgs(["--model-path", "m", "--config", credential, "--api-key", "cli"]).api_key).toBe("cli");
    fs.writeFileSync(path.join(dir, "k.env"), "api-key: x\n");
    expect(() => parseSglangArgs(["--model-path", "m", "--config", path.join(dir, "k.env")])).toThrow(ServerArgsError);
    fs.rmSync(dir, { recursive: true, force: true });
    expect(plain.speculative).toBeUndefined();
    const e = parseSglangArgs(
      words({
        ...storyArgs,
        speculative: { algorithm: "EAGLE3", draftModelPath: "/d/e", numSteps: 3, eagleTopk: 1, numDraftTokens: 4 },
      }),
    );
    expect(e.speculative).toEqual({
      algorithm: "EAGLE3",
      draftModelPath: "/d/e",
      numSteps: 3,
      eagleTopk: 1,
      numDraftTokens: 4,
    });
    const d = parseSglangArgs(
      words({ ...storyArgs, speculative: { algorithm: "DFLASH", draftModelPath: "/d/f", dflashBlockSize: 16 } }),
    );
    expect(d.speculative).toEqual({
      algorithm: "DFLASH",
      draftModelPath: "/d/f",
      numSteps: 1,
      eagleTopk: 1,
      numDraftTokens: 16,
    });
    // The flags choose the draft behaviour on the host's profile.
    const env = { GPUHOST_SIM_PROFILE: STORY };
    expect(profileFor(d, env).profile.speculative?.algorithm).toBe("DFLASH");
    expect(profileFor(plain, env).profile.speculative).toBeNull();
    expect(profileFor(plain, env).faults).toEqual([]);
  });

  it("refuses what SGLang refuses: unknown flags, missing values, wrong types, partial speculative settings", () => {
    expect(() => parseSglangArgs(["--model-path", "m", "--num-speculative-tokens", "3"])).toThrow(
      new ArgparseError("unrecognized arguments: --num-speculative-tokens 3"),
    );
    expect(() => parseSglangArgs(["--model-path", "m", "--port"])).toThrow(/argument --port: expected one argument/);
    expect(() => parseSglangArgs(["--model-path", "m", "--tp", "eight"])).toThrow(
      /argument --tp-size\/--tensor-parallel-size: invalid int value: 'eight'/,
    );
    expect(() => parseSglangArgs(["--tp", "8"])).toThrow(/required: --model-path/);
    const partial = ["--model-path", "m", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d"];
    expect(() => parseSglangArgs([...partial, "--speculative-num-steps", "3"])).toThrow(ServerArgsError);
    expect(() =>
      parseSglangArgs([
        "--model-path",
        "m",
        "--speculative-algorithm",
        "DFLASH",
        "--speculative-draft-model-path",
        "d",
        "--speculative-num-draft-tokens",
        "8",
        "--speculative-dflash-block-size",
        "16",
      ]),
    ).toThrow(/must equal --speculative-num-draft-tokens/);
    expect(() => parseSglangArgs(["--model-path", "m", "--speculative-algorithm", "MEDUSA"])).toThrow(
      /Unknown speculative algorithm name: MEDUSA/,
    );
  });

  it("weights that do not fit in one GPU's static memory fraction at this --tp are a CUDA OOM at load", () => {
    const env = { GPUHOST_SIM_PROFILE: STORY };
    const tp4 = parseSglangArgs(["--model-path", "m", "--tp", "4"]);
    expect(profileFor(tp4, env).faults).toContain("oom-at-load");
    expect(() => profileFor(parseSglangArgs(["--model-path", "m", "--tp", "16"]), env)).toThrow(/needs 16 GPUs/);
  });

  it("as a process: argparse's error and exit status 2 for an unknown flag", async () => {
    const r = await run(
      path.join(ROOT, "node_modules", ".bin", "tsx"),
      ["simulator/sglang.ts", "--model-path", "m", "--speculative-bogus", "1"],
      { cwd: ROOT, timeout: 60_000 },
    );
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^usage: launch_server\.py/m);
    expect(r.stderr).toContain("launch_server.py: error: unrecognized arguments: --speculative-bogus 1");
  });
});

describe("startup as SGLang does it", () => {
  it("the port opens only after the weights load; /v1/models then answers while /health is 503 until warmup ends", async () => {
    // Phases long enough, and watched by polling rather than fixed sleeps, that a loaded machine
    // (where a timer can fire a second late) cannot skip the window this test looks into.
    const file = derivedProfile("tiny", (p) => {
      p.load = { minSeconds: 1, maxSeconds: 1, warmupSeconds: 5 };
    });
    const sim = await startTestSim({ profile: file, timeScale: 1, openPortAfterLoad: true });
    const port = Number(new URL(sim.url).port);
    const connects = () =>
      new Promise<boolean>((resolve) => {
        const s = net.connect(port, "127.0.0.1");
        s.once("connect", () => (s.destroy(), resolve(true)));
        s.once("error", () => resolve(false));
      });
    expect(await connects()).toBe(false);
    const deadline = Date.now() + 30_000;
    while (!(await connects()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect((await json(`${sim.url}/v1/models`)).status).toBe(200);
    expect((await fetch(`${sim.url}/health`)).status).toBe(503);
    let health = 503;
    while (health === 503 && Date.now() < deadline + 30_000) {
      await new Promise((r) => setTimeout(r, 100));
      health = (await fetch(`${sim.url}/health`)).status;
    }
    expect(health).toBe(200);
    const chat = await post(`${sim.url}/v1/chat/completions`, {
      messages: [{ role: "user", content: "Say just 'OK'" }],
      max_tokens: 16,
      chat_template_kwargs: { thinking: false },
    });
    expect(chat.status).toBe(200);
  });
});
