/**
 * The physics (physics/): a model's facts from its config.json, and the rooflines they give on a
 * host, against figures computed by hand below for two real configs: Kimi K2.6 (MoE, MLA, int4
 * routed experts) and Llama-3.1-8B (dense, GQA, BF16). Each expectation shows its arithmetic.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { findGpu, GPUS, type GpuSpec } from "../../physics/gpus";
import { hostRoofline, RooflineOutputSchema } from "../../physics/outputs";
import { modelFacts, ModelConfigError, type ModelFacts } from "../../physics/model-config";
import {
  bytesPerDecodeStep,
  expectedDistinctExperts,
  flopsPerToken,
  kvBytesPerToken,
  kvBytesPerTokenPerGpu,
  roofline,
  weightBytes,
} from "../../physics/roofline";

const fixture = (name: string): unknown =>
  JSON.parse(fs.readFileSync(path.join(__dirname, "fixtures", name), "utf8")) as unknown;
// The story model's config ships with the project (the story demo reads it); the others are fixtures.
const KIMI_CONFIG = path.join(__dirname, "..", "..", "physics", "models", "kimi-k2.6.config.json");
const kimiJson = () => JSON.parse(fs.readFileSync(KIMI_CONFIG, "utf8")) as unknown;
const kimi = (): ModelFacts => modelFacts(kimiJson());
const llama = (): ModelFacts => modelFacts(fixture("llama-3.1-8b.config.json"));
const part = (m: ModelFacts, name: string) => m.parts.find((p) => p.name === name);
function gpu(name: string): GpuSpec {
  const g = findGpu(name);
  if (!g) throw new Error(`no ${name} in the catalogue`);
  return g;
}
/** Within `rel` of `expected` (relative). */
function near(actual: number, expected: number, rel: number): void {
  expect(Math.abs(actual - expected) / expected, `${actual} vs ${expected}`).toBeLessThanOrEqual(rel);
}

describe("the GPU catalogue", () => {
  it("has the issue's GPUs, each figure with a source", () => {
    for (const name of ["rtx-pro-6000-server", "rtx-pro-6000-workstation", "h100-sxm", "h200-sxm", "b200", "l40s"])
      expect(findGpu(name), name).toBeDefined();
    for (const g of GPUS)
      for (const f of [g.memoryGB, g.memoryBandwidthGBs, g.denseTflops.bf16, g.denseTflops.fp8, g.interconnect])
        expect(f.source.length, `${g.name}`).toBeGreaterThan(20);
  });

  it("finds a GPU by the names nvidia-smi and stack configs use", () => {
    expect(findGpu("NVIDIA RTX PRO 6000 Blackwell Workstation Edition")?.name).toBe("rtx-pro-6000-workstation");
    expect(findGpu("RTX PRO 6000 Blackwell Server Edition")?.name).toBe("rtx-pro-6000-server");
    expect(findGpu("h200")?.name).toBe("h200-sxm");
    expect(findGpu("GTX 1080")).toBeUndefined();
  });

  it("the story's card: 96 GB, 1,792 GB/s, ~504 dense BF16 TFLOPS, FP8 2x, FP4 4x (domain.md)", () => {
    const g = gpu("rtx-pro-6000-server");
    expect([g.memoryGB.value, g.memoryBandwidthGBs.value, g.denseTflops.bf16.value]).toEqual([96, 1792, 504]);
    expect(g.denseTflops.fp8.value).toBe(2 * 504);
    expect(g.denseTflops.fp4.value).toBe(4 * 504);
  });
});

describe("Kimi K2.6 from its config.json (MoE, MLA, int4 group 32 routed experts)", () => {
  // Per layer, MLA (H 7168, 64 heads, q_lora 1536, kv_lora 512, rope 64, nope 128, v 128):
  //   q_a 7168x1536 = 11,010,048; q_b 1536 x 64x(128+64) = 18,874,368;
  //   kv_a 7168 x (512+64) = 4,128,768; kv_b 512 x 64x(128+128) = 8,388,608; o 64x128 x 7168 = 58,720,256
  //   = 101,122,048; x 61 layers = 6,168,444,928.
  // Norms: 61 x (2x7168 + 1536 + 512) + 7168 = 1,006,592.
  // Dense MLP (layer 0): 3 x 7168 x 18432 = 396,361,728.
  // One expert: 3 x 7168 x 2048 = 44,040,192; 60 MoE layers:
  //   routed 60 x 384 x 44,040,192 = 1,014,686,023,680; active 60 x 8 x 44,040,192 = 21,139,292,160;
  //   shared 60 x 44,040,192 = 2,642,411,520; router 60 x 384 x 7168 = 165,150,720.
  // Embedding and lm_head: 163840 x 7168 = 1,174,405,120 each (untied).
  it("parameters per part, attention kind and ranks, what is quantized", () => {
    const m = kimi();
    expect(m.attention).toEqual({
      kind: "MLA",
      heads: 64,
      qLoraRank: 1536,
      kvLoraRank: 512,
      ropeHeadDim: 64,
      nopeHeadDim: 128,
      vHeadDim: 128,
    });
    expect(m.moe).toMatchObject({
      routedExperts: 384,
      activePerToken: 8,
      sharedExperts: 1,
      moeLayers: 60,
      denseLayers: 1,
    });
    expect(part(m, "attention")?.params).toBe(6_168_444_928);
    expect(part(m, "norms")?.params).toBe(1_006_592);
    expect(part(m, "denseMlp")?.params).toBe(396_361_728);
    expect(part(m, "routedExperts")).toMatchObject({ params: 1_014_686_023_680, activeParams: 21_139_292_160 });
    expect(part(m, "sharedExperts")?.params).toBe(2_642_411_520);
    expect(part(m, "router")?.params).toBe(165_150_720);
    expect(part(m, "lmHead")?.params).toBe(1_174_405_120);
    expect(m.tiedEmbeddings).toBe(false);
    // int4 with one BF16 scale per 32 weights: 0.5 + 2/32 = 0.5625 bytes; the rest stays BF16.
    expect(part(m, "routedExperts")?.bytesPerParam).toBe(0.5625);
    for (const p of ["attention", "denseMlp", "sharedExperts", "router", "lmHead", "embedding"])
      expect(part(m, p)?.bytesPerParam, p).toBe(2);
    expect(m.quantization).toBe("int4 group 32 (compressed-tensors)");
  });

  // Bytes per decode step at batch 1: BF16 parts x 2 bytes, active routed x 0.5625:
  //   attention 12,336,889,856 + norms 2,013,184 + dense MLP 792,723,456 + shared 5,284,823,040
  //   + router 330,301,440 + routed 21,139,292,160 x 0.5625 = 11,890,851,840 + lm_head 2,348,810,240
  //   + one embedding row 14,336 = 32,986,427,392 bytes (~33.0 GB).
  // 8 x RTX PRO 6000: 8 x 1,792 GB/s = 14,336 GB/s; 14,336e9 / 32,986,427,392 = 434.6 tok/s.
  it("reads ~33 GB per decode step: ~435 tok/s at batch 1 on 8 x RTX PRO 6000 (the issue's ~440)", () => {
    const m = kimi();
    near(bytesPerDecodeStep(m, 1), 32_986_427_392, 1e-9);
    const r = roofline(m, { gpu: gpu("rtx-pro-6000-server"), gpus: 8, memFractionStatic: 0.9, contextTokens: 1000 });
    near(r.batch1TokensPerSecond, 434.6, 1e-3);
    near(r.batch1TokensPerSecond, 440, 0.02);
  });

  // KV per token: MLA caches kv_lora + rope = 576 values per layer: 61 x 576 x 2 bytes = 70,272,
  // and every GPU at TP 8 holds all of it (the latent is shared by the heads).
  // Weights: routed all 1,014,686,023,680 x 0.5625 = 570,760,888,320 + the BF16 parts above
  // (21,095,575,552 less the one embedding row, plus the whole embedding 2,348,810,240)
  //   = 594,205,259,776 bytes; per GPU / 8 = 74,275,657,472.
  // KV room per GPU: 96e9 x 0.9 - 74,275,657,472 = 12,124,342,528 -> / 70,272 = 172,534 tokens;
  //   at 1,000 tokens of context: 172 sequences.
  it("KV bytes per token and the KV-cache bound on concurrency", () => {
    const m = kimi();
    expect(kvBytesPerToken(m)).toBe(70_272);
    expect(kvBytesPerTokenPerGpu(m, 8)).toBe(70_272);
    expect(weightBytes(m)).toBe(594_205_259_776);
    const r = roofline(m, { gpu: gpu("rtx-pro-6000-server"), gpus: 8, memFractionStatic: 0.9, contextTokens: 1000 });
    expect(r.kvCacheTokens).toBe(172_534);
    expect(r.kvBoundConcurrency).toBe(172);
  });

  // At batch 128 the tokens route to 384 x (1 - (376/384)^128) = 358.06 distinct experts per layer
  // (uniform routing): routed bytes 60 x 358.06 x 24,772,608 = 532.2 GB, plus the 21.1 GB the step
  // reads besides (and 127 more embedding rows) = 553.3 GB; 128 x 14,336e9 / 553.3e9 = 3,316 tok/s.
  // Published (voipmonitor/rtx6kpro): 2,026 at 128 without speculation = 61 %; 2,730 with EAGLE-3 = 82 %.
  // FLOPs per token: 2 x active matmul weights (31,686,066,176) = 63,372,132,352, plus attention
  //   61 x (2x64x576 + 2x64x512) = 8,495,104 per context token; at 0 context: 8 x 504e12 / 63.37e9
  //   = 63,623 tok/s, of which 2,026 is 3.2 %.
  it("the roofline at the measured concurrency: 61 % without speculation, 82 % with EAGLE-3, 3 % of compute", () => {
    const m = kimi();
    near(expectedDistinctExperts(384, 8, 128), 358.06, 1e-4);
    expect(expectedDistinctExperts(384, 8, 1)).toBeCloseTo(8, 9);
    near(bytesPerDecodeStep(m, 128), 553.3e9, 1e-3);
    expect(flopsPerToken(m)).toBe(63_372_132_352);
    expect(flopsPerToken(m, 1000) - flopsPerToken(m)).toBe(8_495_104_000);
    const host = { gpu: gpu("rtx-pro-6000-server"), gpus: 8, memFractionStatic: 0.9, contextTokens: 0 };
    const ar = roofline(m, { ...host, contextTokens: 1000 }, { concurrency: 128, tokensPerSecond: 2026 }).atConcurrency;
    near(ar?.weightReadTokensPerSecond ?? 0, 3316, 1e-3);
    near(ar?.fraction ?? 0, 0.611, 0.005);
    expect(ar?.limiter).toBe("memory bandwidth");
    expect(ar?.lever).toMatch(/more concurrency .*172 sequences.*speculative service/);
    const eagle = roofline(
      m,
      { ...host, contextTokens: 1000 },
      { concurrency: 128, tokensPerSecond: 2730 },
    ).atConcurrency;
    near(eagle?.fraction ?? 0, 0.823, 0.005);
    const atZero = roofline(m, { ...host, contextTokens: 1 }, { concurrency: 128, tokensPerSecond: 2026 });
    near(atZero.computeBoundTokensPerSecond, 63_623, 1e-3);
    near(atZero.atConcurrency?.computeFraction ?? 0, 0.032, 0.02);
  });

  it("at a concurrency the KV cache cannot hold, the limiter is the cache and the lever decode context parallelism", () => {
    // At 2,000 tokens of context the cache holds 172,534 / 2,000 = 86 sequences; 128 is past it.
    const r = roofline(
      kimi(),
      { gpu: gpu("rtx-pro-6000-server"), gpus: 8, memFractionStatic: 0.9, contextTokens: 2000 },
      { concurrency: 128, tokensPerSecond: 2026 },
    );
    expect(r.kvBoundConcurrency).toBe(86);
    expect(r.atConcurrency?.limiter).toBe("KV cache");
    expect(r.atConcurrency?.lever).toMatch(/decode context parallelism/);
  });

  it("a multimodal config (language model under text_config, quantization at the top) reads the same", () => {
    const flat = kimiJson() as Record<string, unknown>;
    const { quantization_config, ...text } = flat;
    const nested = { architectures: ["KimiK25ForConditionalGeneration"], quantization_config, text_config: text };
    expect(bytesPerDecodeStep(modelFacts(nested))).toBe(bytesPerDecodeStep(kimi()));
  });
});

describe("Llama-3.1-8B from its config.json (dense, GQA, BF16)", () => {
  // Per layer: q 4096x4096 = 16,777,216; k and v 4096 x 8x128 = 4,194,304 each; o 16,777,216
  //   = 41,943,040; MLP 3 x 4096 x 14336 = 176,160,768; norms 2 x 4096.
  // 32 layers: attention 1,342,177,280; MLP 5,637,144,576; norms 32 x 8192 + 4096 = 266,240.
  // Embedding and lm_head 128256 x 4096 = 525,336,576 each. Total 8,030,261,248 (the "8B").
  // Bytes per step: (1,342,177,280 + 5,637,144,576 + 266,240 + 525,336,576 + one row 4096) x 2
  //   = 15,009,857,536 bytes; one H100 SXM at 3,350 GB/s: 3,350e9 / 15,009,857,536 = 223.2 tok/s.
  // KV per token: 32 layers x 2 (K, V) x 8 heads x 128 x 2 bytes = 131,072; at TP 2 each GPU holds
  //   4 of the 8 heads: 65,536; at TP 16 each holds one (replicated): 16,384.
  // FLOPs per token at 0 context: 2 x (1,342,177,280 + 5,637,144,576 + 525,336,576) = 15,009,316,864.
  it("parameters, GQA, bytes per step, KV per token, FLOPs", () => {
    const m = llama();
    expect(m.attention).toEqual({ kind: "GQA", heads: 32, kvHeads: 8, headDim: 128 });
    expect(m.moe).toBeNull();
    expect(m.quantization).toBeNull();
    expect(m.parts.reduce((s, p) => s + p.params, 0)).toBe(8_030_261_248);
    expect(bytesPerDecodeStep(m, 1)).toBe(15_009_857_536);
    expect(kvBytesPerToken(m)).toBe(131_072);
    expect(kvBytesPerTokenPerGpu(m, 2)).toBe(65_536);
    expect(kvBytesPerTokenPerGpu(m, 16)).toBe(16_384);
    expect(flopsPerToken(m)).toBe(15_009_316_864);
    const r = roofline(m, { gpu: gpu("h100-sxm"), gpus: 1, memFractionStatic: 0.9, contextTokens: 4096 });
    near(r.batch1TokensPerSecond, 223.2, 1e-3);
    // KV room: 80e9 x 0.9 - 16,060,522,496 weight bytes = 55,939,477,504 / 131,072 = 426,784 tokens.
    expect(r.kvCacheTokens).toBe(426_784);
    expect(r.kvBoundConcurrency).toBe(104);
  });

  it("a tied model holds the head once and still reads it every step", () => {
    const tied = modelFacts({ ...(fixture("llama-3.1-8b.config.json") as object), tie_word_embeddings: true });
    expect(weightBytes(tied)).toBe(weightBytes(llama()) - 525_336_576 * 2);
    expect(bytesPerDecodeStep(tied)).toBe(bytesPerDecodeStep(llama()));
  });
});

describe("a config.json gpuhost cannot size is refused in one sentence naming the key", () => {
  it.each([
    [{ hidden_size: 4096 }, /config\.json's num_hidden_layers/],
    [{ ...(fixture("llama-3.1-8b.config.json") as object), num_hidden_layers: "32" }, /num_hidden_layers/],
    [
      { ...(fixture("llama-3.1-8b.config.json") as object), quantization_config: { quant_method: "hqq" } },
      /quant_method "hqq" is not one gpuhost can size/,
    ],
    [[1, 2], /not a JSON object/],
  ])("%#", (json, message) => {
    expect(() => modelFacts(json)).toThrow(ModelConfigError);
    expect(() => modelFacts(json)).toThrow(message);
  });
});

describe("a stack's roofline output: from the config.json read on the host, or why it is not known", () => {
  const story = {
    connection: { kind: "ssh" },
    gpus: { count: 8, model: "NVIDIA RTX PRO 6000 Blackwell Server Edition" },
  };
  const shape = { memFractionStatic: 0.9, contextTokens: 1000 };
  const found = {
    found: "/models/moonshotai/Kimi-K2.6/config.json",
    config: fs.readFileSync(KIMI_CONFIG).toString("base64"),
  };
  const at128 = { concurrency: 128, tokensPerSecond: 2026, speculative: false };

  it.each([
    [
      { connection: { kind: "simulated" }, gpus: { count: 1, model: "Simulated GPU" } },
      found,
      /"Simulated GPU" is not in the GPU catalogue/,
    ],
    [
      { connection: { kind: "ssh" }, gpus: { count: 1 } },
      found,
      /gpus\.model is not set \(the model's config\.json was read: \/models\/moonshotai\/Kimi-K2\.6\/config\.json\)$/,
    ],
    [
      { connection: { kind: "ssh" }, gpus: { count: 0 } },
      { missing: "/m/config.json" },
      /: the host has no GPUs \(gpus\.count 0\); no config\.json on the host at \/m\/config\.json$/,
    ],
    [story, undefined, /config\.json was not read/],
    [story, { missing: "/models/x/config.json" }, /no config\.json on the host at \/models\/x\/config\.json/],
    [story, { toolarge: "/models/x/config.json" }, /over 1 MiB/],
    [
      story,
      { found: "/m/config.json", config: Buffer.from("<html>").toString("base64") },
      /\/m\/config\.json on the host cannot be sized \(it is not JSON\)/,
    ],
    [
      story,
      { found: "/m/config.json", config: Buffer.from('{"hidden_size": 1}').toString("base64") },
      /cannot be sized \(config\.json's num_hidden_layers/,
    ],
  ])("%#", (host, read, reason) => {
    const out = RooflineOutputSchema.parse(hostRoofline(host, read, shape, at128));
    expect(out.known).toBe(false);
    expect(out.known ? "" : out.reason).toMatch(reason);
  });

  it("the story host's config.json and measured figure: the same roofline `gpuhost plan` prints (61 % at 128)", () => {
    const out = RooflineOutputSchema.parse(hostRoofline(story, found, shape, at128));
    const plan = roofline(kimi(), { gpu: gpu("rtx-pro-6000-server"), gpus: 8, ...shape }, at128);
    expect(out).toEqual({
      known: true,
      gpu: plan.gpu,
      gpus: 8,
      bytesPerStepGB: plan.bytesPerStepGB,
      batch1TokensPerSecond: plan.batch1TokensPerSecond,
      computeBoundTokensPerSecond: plan.computeBoundTokensPerSecond,
      kvBoundConcurrency: plan.kvBoundConcurrency,
      fraction: plan.atConcurrency!.fraction,
      limiter: plan.atConcurrency!.limiter,
      lever: plan.atConcurrency!.lever,
    });
    near(out.known ? (out.fraction ?? 0) : 0, 0.611, 0.005);
    // No sustained figure (the benchmark measured none): the roofline stands, the fraction is not invented.
    const none = hostRoofline(story, found, shape, { concurrency: null, tokensPerSecond: null, speculative: false });
    expect(none).toMatchObject({ known: true, fraction: null, limiter: null });
  });
});
