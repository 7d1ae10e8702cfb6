/**
 * `gpuhost plan --gpu --gpus --model-config --concurrency`, called as a function (as
 * test/gate/cli.test.ts calls it): the story's measurement placed on its host's roofline, and bad
 * physics flags refused in one sentence naming the flag.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { compareMain } from "../../cli/compare";
import { planMain } from "../../cli/plan";
import { io } from "../gate/cli-fixture";

const KIMI = path.join(__dirname, "..", "..", "physics", "models", "kimi-k2.6.config.json");
const STORY = ["--gpu", "rtx-pro-6000-workstation", "--gpus", "8", "--model-config", KIMI];

describe("gpuhost plan places the measured throughput on the roofline (issue 28 point 2)", () => {
  it("the story: 2,026 tok/s at 128 on 8 x RTX PRO 6000 is 61 % of the weight-read roofline", async () => {
    const o = io();
    const argv = ["--throughput", "2026", "--concurrency", "128", "--context-tokens", "1000", ...STORY];
    expect(await planMain(argv, o), o.err()).toBe(0);
    const out = o.out();
    expect(out).toContain("one host: 10.3 days"); // 1.8e9 / (2,026 x 86,400)
    expect(out).toMatch(/^bandwidth roofline at batch 1: 435 tok\/s \(8 x rtx-pro-6000-workstation\)$/m);
    expect(out).toMatch(/^roofline at concurrency 128: 3,316 tok\/s/m);
    expect(out).toMatch(/^measured 2,026 tok\/s = 61 % of the roofline at 128 \(4 % of compute\)$/m);
    expect(out).toMatch(/^KV-cache bound on concurrency: 172 sequences of 1,000 tokens/m);
    expect(out).toMatch(/^limiter: memory bandwidth; lever: more concurrency .*speculative service/m);
  });

  it("as JSON, the roofline beside the plan; without the physics flags, roofline null", async () => {
    const o = io();
    expect(await planMain(["--throughput", "825", "--concurrency", "64", "--json", ...STORY], o), o.err()).toBe(0);
    const p = JSON.parse(o.out()) as {
      daysOnOneHost: number;
      roofline: { batch1TokensPerSecond: number; atConcurrency: { fraction: number } };
    };
    expect(p.roofline.batch1TokensPerSecond).toBeCloseTo(434.6, 1);
    expect(p.roofline.atConcurrency.fraction).toBeGreaterThan(0);
    const bare = io();
    expect(await planMain(["--throughput", "825", "--json"], bare)).toBe(0);
    expect((JSON.parse(bare.out()) as { roofline: unknown }).roofline).toBeNull();
  });

  it("refuses bad physics input in one sentence naming the flag", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-plan-"));
    const notJson = path.join(dir, "config.json");
    fs.writeFileSync(notJson, "{ not json");
    const unsized = path.join(dir, "hqq.json");
    fs.writeFileSync(
      unsized,
      JSON.stringify({
        ...(JSON.parse(fs.readFileSync(KIMI, "utf8")) as object),
        quantization_config: { quant_method: "hqq" },
      }),
    );
    const cases: [string[], RegExp][] = [
      [
        ["--gpu", "gtx-1080", "--model-config", KIMI],
        /^gpuhost plan: --gpu takes one of rtx-pro-6000-server, .*, l40s, got "gtx-1080"$/,
      ],
      [["--model-config", KIMI], /^gpuhost plan: --model-config needs --gpu and --model-config/],
      [["--concurrency", "8"], /^gpuhost plan: --concurrency needs --gpu and --model-config/],
      [
        ["--gpu", "h200", "--model-config", path.join(dir, "missing.json")],
        /--model-config .*missing\.json cannot be read \(ENOENT\)$/,
      ],
      [["--gpu", "h200", "--model-config", notJson], /--model-config .*config\.json is not JSON$/],
      [["--gpu", "h200", "--model-config", unsized], /quant_method "hqq" is not one gpuhost can size/],
      [
        ["--gpu", "h200", "--model-config", KIMI, "--mem-fraction-static", "1"],
        /--mem-fraction-static takes a fraction above 0 and below 1/,
      ],
      [["--gpu", "h200", "--model-config", KIMI, "--gpus", "0"], /--gpus takes a whole number of at least 1/],
    ];
    try {
      for (const [argv, message] of cases) {
        const o = io();
        expect(await planMain(["--throughput", "800", ...argv], o), argv.join(" ")).toBe(2);
        const [sentence, usage, ...rest] = o.err().split("\n");
        expect(sentence).toMatch(message);
        expect(usage).toMatch(/^usage: gpuhost plan/);
        expect(rest.join("")).toBe("");
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("gpuhost compare takes the same flags and refuses them the same way, before it measures anything", async () => {
    const o = io();
    const argv = ["--endpoint", "http://127.0.0.1:9", "--activate-command", "true {unit}", "--model-config", KIMI];
    expect(await compareMain(argv, o)).toBe(2);
    expect(o.err()).toMatch(/^gpuhost compare: --model-config needs --gpu and --model-config/);
    const bad = io();
    expect(await compareMain([...argv, "--gpu", "gtx-1080"], bad)).toBe(2);
    expect(bad.err()).toMatch(/^gpuhost compare: --gpu takes one of rtx-pro-6000-server, /);
  });
});
