/**
 * Issue 28 point 4 (the attention-backend part): `services.attentionBackend` takes the pinned
 * SGLang's choices, and the stack config refuses one the hosts' GPUs cannot run, in one sentence
 * naming the rule, its versions and its source (what `pulumi preview` prints as a ConfigError).
 */
import { describe, expect, it } from "vitest";
import { serverArgsFor, sglangArgv } from "../../components/services/launch-args";
import { ConfigError, parseConfig } from "../../stack/config";
import { attentionBackendIssues } from "../../physics/preflight";

const story = (attentionBackend: string, computeCapability = "12.0") => ({
  hosts: [{ name: "gpu-1", connection: { kind: "local" }, gpus: { count: 8, computeCapability } }],
  services: { tp: 8, attentionBackend },
});

function refusal(raw: Record<string, unknown>): string[] {
  try {
    parseConfig(raw);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues.map((i) => `${i.path}: ${i.message}`);
  }
  throw new Error("config was accepted");
}

describe("attention backends the GPUs cannot run are refused at preview", () => {
  it("trtllm_mla on SM 12.0 (RTX PRO 6000): one sentence naming the rule and its source", () => {
    expect(refusal(story("trtllm_mla"))).toEqual([
      expect.stringMatching(
        /^gpuhost:services\.attentionBackend: host 'gpu-1': trtllm_mla cannot run on compute capability 12\.0 \(rule sm120-no-trtllm-mla, SGLang 0\.5\.23 .*flashinfer #5445/,
      ),
    ]);
  });

  it("fa3 off Hopper is refused; on 9.0 it passes, as does triton on 12.0", () => {
    expect(refusal(story("fa3"))[0]).toMatch(/rule sm90-only-backends/);
    expect(() => parseConfig(story("fa3", "9.0"))).not.toThrow();
    expect(() => parseConfig(story("triton"))).not.toThrow();
    expect(attentionBackendIssues("trtllm_mla", "10.0")).toEqual([]);
  });

  it("a value SGLang does not have is refused by the schema, and a good one reaches the launch flags", () => {
    expect(refusal(story("flash_attention_9"))[0]).toMatch(
      /attentionBackend: must be one of the pinned SGLang's choices/,
    );
    const c = parseConfig(story("triton"));
    const argv = sglangArgv(serverArgsFor("autoregressive", c.services, { apiKey: false }));
    expect(argv[argv.indexOf("--attention-backend") + 1]).toBe("triton");
  });
});
