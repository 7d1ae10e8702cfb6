/**
 * Issue 28 point 4 (the attention-backend and toolkit parts): `services.attentionBackend` takes the
 * pinned SGLang's choices, and the stack config refuses one the hosts' GPUs cannot run, or a CUDA
 * release they cannot be served with, in one sentence naming the rule, its versions and its source
 * (what `pulumi preview` prints as a ConfigError).
 */
import { describe, expect, it } from "vitest";
import { serverArgsFor, sglangArgv } from "../../components/services/launch-args";
import { parseConfig } from "../../stack/config";
import { configIssues } from "../support/config-issues";
import * as fs from "node:fs";
import * as path from "node:path";
import { attentionBackendIssues, releaseBefore, TOOLKIT_RULES, toolkitIssues } from "../../physics/preflight";

const story = (attentionBackend: string, computeCapability = "12.0") => ({
  hosts: [{ name: "gpu-1", connection: { kind: "local" }, gpus: { count: 8, computeCapability } }],
  services: { tp: 8, attentionBackend },
});

const refusal = configIssues;

describe("attention backends the GPUs cannot run are refused at preview", () => {
  it("trtllm_mla on SM 12.0 (RTX PRO 6000): one sentence naming the rule and its source", () => {
    expect(refusal(story("trtllm_mla"))).toEqual([
      expect.stringMatching(
        /^gpuhost:services\.attentionBackend: host 'gpu-1': trtllm_mla cannot run on compute capability 12\.0 \(rule sm120-no-trtllm-mla, SGLang 0\.5\.23 .*XQA MLA kernel, which takes exactly 128 query heads per GPU .*flashinfer #2745/,
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

describe("a CUDA release the GPUs cannot be served with is refused at preview", () => {
  const host = (computeCapability: string, release: string) => ({
    hosts: [{ name: "gpu-1", connection: { kind: "local" }, gpus: { count: 8, computeCapability } }],
    services: { tp: 8 },
    toolkit: { release },
  });

  it("toolkit.release 12.8 on SM 12.0: FlashInfer's rule, one sentence with its source", () => {
    expect(refusal(host("12.0", "12.8"))).toEqual([
      expect.stringMatching(
        /^gpuhost:toolkit\.release: host 'gpu-1': compute capability 12\.0 needs CUDA >= 12\.9, not 12\.8 \(rule sm12x-flashinfer-needs-cuda-12\.9, .*flashinfer\/jit\/compilation_context\.py\)$/,
      ),
    ]);
  });

  it("13.0 on SM 12.0 and 12.8 on Hopper pass; a release before 12.8 breaks both SM 12.x rules", () => {
    expect(() => parseConfig(host("12.0", "13.0"))).not.toThrow();
    expect(() => parseConfig(host("9.0", "12.8"))).not.toThrow();
    expect(toolkitIssues("12.6", "12.0").map((m) => /rule (\S+),/.exec(m)?.[1])).toEqual([
      "sm12x-needs-cuda-12.8",
      "sm12x-flashinfer-needs-cuda-12.9",
    ]);
    expect([releaseBefore("12.9", "13.0"), releaseBefore("13.0", "12.9"), releaseBefore("12.9", "12.9")]).toEqual([
      true,
      false,
      false,
    ]);
  });

  it("verify.sh on the host checks the same minimum as the table (it runs where TypeScript does not)", () => {
    const verify = fs.readFileSync(
      path.join(__dirname, "..", "..", "components", "cuda-toolkit", "scripts", "verify.sh"),
      "utf8",
    );
    const sm12 = TOOLKIT_RULES.filter((r) => r.computeCapability.test("12.0")).map((r) => r.minimumCuda);
    const strictest = sm12.reduce((a, b) => (releaseBefore(a, b) ? b : a));
    expect(verify).toContain(`needs CUDA >= ${strictest} for FlashInfer`);
  });
});
