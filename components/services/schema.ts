/**
 * The knobs of the serving services: the single source of their defaults and documentation.
 * stack/config.ts composes this into the stack-config schema.
 */
import { z } from "zod";
import { PATH_MAX_CHARS, atMostChars } from "../text-bounds";
import { ATTENTION_BACKENDS, REASONING_PARSERS, TOOL_CALL_PARSERS } from "./sglang-choices";

export const SERVICE_KINDS = ["autoregressive", "eagle3", "dflash"] as const;
export type ServiceKind = (typeof SERVICE_KINDS)[number];

/**
 * A model: a local path or a repository id, printable text without control characters, at most a
 * path long (it ends up in a unit file and argv).
 */
const modelPathSchema = (what: string) =>
  z
    .string()
    .min(1)
    .max(PATH_MAX_CHARS, atMostChars(PATH_MAX_CHARS))
    // eslint-disable-next-line no-control-regex -- control characters are what this refuses
    .refine((v) => !/[\u0000-\u001f\u007f]/.test(v), {
      message: `${what} must not contain control characters (newlines, tabs)`,
    });

/** A value SGLang's parser takes only from its fixed list (argparse choices): refused here, at preview. */
const sglangChoice = (choices: readonly [string, ...string[]]) =>
  z.string().refine((v) => choices.includes(v), {
    message: `must be one of the pinned SGLang's choices: ${choices.join(", ")}`,
  });

export const SpeculativeSchema = z
  .object({
    draftModelPath: modelPathSchema("draftModelPath").describe(
      "--speculative-draft-model-path: the draft model (a local path or a repository id). Quoted for systemd, never passed through a shell.",
    ),
    numSteps: z
      .number()
      .int()
      .positive()
      .optional()
      .describe("--speculative-num-steps (set all three of numSteps, eagleTopk, numDraftTokens, or none)."),
    eagleTopk: z
      .number()
      .int()
      .positive()
      .optional()
      .describe("--speculative-eagle-topk (set with numSteps and numDraftTokens)."),
    numDraftTokens: z
      .number()
      .int()
      .positive()
      .optional()
      .describe("--speculative-num-draft-tokens (set with numSteps and eagleTopk)."),
    memFractionStatic: z
      .number()
      .gt(0)
      .lt(1)
      .optional()
      .describe(
        "--mem-fraction-static for this service only (the draft model needs room); default: services.memFractionStatic.",
      ),
    acceptanceFloor: z
      .number()
      .min(1)
      .default(1.5)
      .describe(
        "Least mean tokens per verify step (measured after readiness on a realistic prompt) for this service to count as ready; below it verification fails naming the draft model. At ~1 token per step speculation is slower than none.",
      ),
  })
  .strict();

export const Eagle3Schema = SpeculativeSchema.describe(
  "The EAGLE-3 speculative service (`--speculative-algorithm EAGLE3`). Unset: no EAGLE-3 unit.",
);

export const DflashSchema = SpeculativeSchema.extend({
  blockSize: z
    .number()
    .int()
    .positive()
    .optional()
    .describe("--speculative-dflash-block-size; must equal numDraftTokens when both are set."),
})
  .strict()
  .describe("The DFlash speculative service (`--speculative-algorithm DFLASH`). Unset: no DFlash unit.");

export const RestartPolicySchema = z
  .object({
    restartSec: z
      .number()
      .int()
      .min(1)
      .default(15)
      .describe("RestartSec=: pause before systemd restarts a failed service."),
    startLimitIntervalSec: z
      .number()
      .int()
      .min(1)
      .default(3600)
      .describe(
        "StartLimitIntervalSec=: the window in which start attempts are counted (long, because one load takes up to 10 minutes).",
      ),
    startLimitBurst: z
      .number()
      .int()
      .min(1)
      .default(3)
      .describe(
        "StartLimitBurst=: starts allowed in that window before systemd gives up (a crash loop stops instead of hogging the GPUs).",
      ),
  })
  .strict();

export const ServicesSchema = z
  .object({
    active: z
      .enum([...SERVICE_KINDS, "auto"])
      .default("autoregressive")
      .describe(
        "The one service that runs; `pulumi up` stops the others and starts this one. eagle3/dflash need their section set. auto (with compare): the comparison's recommendation.",
      ),
    compare: z
      .boolean()
      .default(false)
      .describe(
        "`pulumi up` measures every configured service in turn on the same GPUs with the benchmark's workload (one active at a time), records each one's sweep, knee, acceptance and crossover as outputs with a recommendation, then leaves active the winner (active: auto) or the configured service. Re-measured only when a unit, the workload or the policy changes.",
      ),
    modelPath: modelPathSchema("modelPath")
      .default("moonshotai/Kimi-K2.6")
      .describe(
        "--model-path shared by all services: a local path or a repository id. Quoted for systemd, never passed through a shell.",
      ),
    servedModelName: z
      .string()
      // An id, not a path: it is an argparse value (a leading '-' would read as a flag), the `model`
      // field of every request, and a Prometheus label; plain characters keep it the same in all three.
      .regex(
        /^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,255}$/,
        "must be 1-256 characters of letters, digits and ._:/@+- starting with a letter or digit (e.g. moonshotai/Kimi-K2.6)",
      )
      .optional()
      .describe(
        "--served-model-name: the id clients and the gate use (1-256 of letters, digits and ._:/@+-); default: the model path.",
      ),
    tp: z.number().int().min(1).max(64).default(1).describe("--tp: tensor-parallel size (GPUs per service)."),
    host: z
      .union([z.ipv4(), z.literal("localhost")])
      .default("127.0.0.1")
      .describe("--host the server binds. Loopback unless told otherwise: the API is unauthenticated without apiKey."),
    port: z.number().int().min(1).max(65535).default(30000).describe("--port the server listens on."),
    reasoningParser: sglangChoice(REASONING_PARSERS).optional().describe("--reasoning-parser (kimi_k2 for Kimi K2.x)."),
    toolCallParser: sglangChoice(TOOL_CALL_PARSERS).optional().describe("--tool-call-parser (kimi_k2 for Kimi K2.x)."),
    trustRemoteCode: z.boolean().default(false).describe("--trust-remote-code (Kimi K2.x ships custom model code)."),
    memFractionStatic: z.number().gt(0).lt(1).optional().describe("--mem-fraction-static; default: SGLang's own."),
    contextLength: z.number().int().positive().optional().describe("--context-length; default: the model's."),
    attentionBackend: sglangChoice(ATTENTION_BACKENDS)
      .optional()
      .describe(
        "--attention-backend; default: SGLang's own. Refused where a host's gpus.computeCapability cannot run it (physics/preflight.ts: e.g. trtllm_mla on SM 12.x).",
      ),
    enableMetrics: z
      .boolean()
      .default(true)
      .describe("--enable-metrics: /metrics, which the benchmark reads for the speculative acceptance length."),
    timeoutStartSec: z
      .number()
      .int()
      .min(1)
      .default(600)
      .describe(
        "TimeoutStartSec=: how long systemd lets a start take (loading the story's (docs/story.md) 548 GB took 330-630 s).",
      ),
    restart: RestartPolicySchema.prefault({}).describe("Restart=on-failure limits."),
    eagle3: Eagle3Schema.optional(),
    dflash: DflashSchema.optional(),
  })
  .strict()
  .superRefine((s, ctx) => {
    for (const kind of ["eagle3", "dflash"] as const) {
      const spec = s[kind];
      if (spec) {
        const set = [spec.numSteps, spec.eagleTopk, spec.numDraftTokens].filter((v) => v !== undefined).length;
        if (set !== 0 && set !== 3) {
          ctx.addIssue({
            code: "custom",
            path: [kind],
            message: "set all three of numSteps, eagleTopk and numDraftTokens, or none (SGLang rejects a partial set)",
          });
        }
      }
      if (s.active === kind && !spec) {
        ctx.addIssue({
          code: "custom",
          path: ["active"],
          message: `active is '${kind}' but services.${kind} is not set`,
        });
      }
    }
    if (s.active === "auto" && !s.compare) {
      ctx.addIssue({
        code: "custom",
        path: ["active"],
        message: "active 'auto' picks the service by measurement: set services.compare: true",
      });
    }
    // SGLang 0.5.23 (sglang.srt.arg_groups.speculative_hook) silently rewrites these: refused here so the
    // config says what runs.
    const e = s.eagle3;
    if (e?.eagleTopk === 1 && e.numSteps !== undefined && e.numDraftTokens !== e.numSteps + 1) {
      ctx.addIssue({
        code: "custom",
        path: ["eagle3", "numDraftTokens"],
        message: `with eagleTopk 1 the draft is a chain: must be numSteps + 1 (${e.numSteps + 1}), got ${e.numDraftTokens} (SGLang would replace it)`,
      });
    }
    const d = s.dflash;
    for (const key of ["numSteps", "eagleTopk"] as const) {
      if (d?.[key] !== undefined && d[key] !== 1) {
        ctx.addIssue({
          code: "custom",
          path: ["dflash", key],
          message: `DFlash drafts one block per step: must be 1, got ${d[key]} (SGLang would replace it)`,
        });
      }
    }
    if (d?.blockSize !== undefined && d.numDraftTokens !== undefined && d.blockSize !== d.numDraftTokens) {
      ctx.addIssue({
        code: "custom",
        path: ["dflash", "blockSize"],
        message: `must equal numDraftTokens (${d.numDraftTokens}), got ${d.blockSize}`,
      });
    }
  })
  .describe(
    "The SGLang services: one autoregressive and optional EAGLE-3 and DFlash services sharing the GPUs; exactly one runs.",
  );

export type ServicesConfig = z.infer<typeof ServicesSchema>;
export type ServicesConfigInput = z.input<typeof ServicesSchema>;

/**
 * The service ServingService starts first: the configured one, or autoregressive under `auto`
 * until the comparison (components/service-comparison) has measured and picked.
 */
export function initialService(s: Pick<ServicesConfig, "active">): ServiceKind {
  return s.active === "auto" ? "autoregressive" : s.active;
}

/** The configured services: autoregressive always, EAGLE-3 and DFlash where their section is set. */
export function configuredServices(s: ServicesConfig): ServiceKind[] {
  return SERVICE_KINDS.filter((k) => k === "autoregressive" || s[k] !== undefined);
}

/** A speculative service's draft and the acceptance floor its verification checks. */
export interface Speculative {
  algorithm: string;
  draftModelPath: string;
  acceptanceFloor: number;
}

/** A service's draft and acceptance floor (default: the configured active one); undefined for autoregressive. */
export function speculativeOf(s: ServicesConfig, active: ServiceKind = initialService(s)): Speculative | undefined {
  if (active === "autoregressive") return undefined;
  const spec = s[active];
  if (!spec) return undefined;
  return {
    algorithm: active === "eagle3" ? "EAGLE3" : "DFLASH",
    draftModelPath: spec.draftModelPath,
    acceptanceFloor: spec.acceptanceFloor,
  };
}
