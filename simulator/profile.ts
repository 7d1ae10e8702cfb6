import * as fs from "node:fs";
import * as path from "node:path";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { projectFile } from "../project-files";
import { faultNameSchema, faultSettingsSchema } from "./faults";
import { ALGORITHMS, draftModelSchema, type Algorithm, type DraftModel } from "./speculative";

/**
 * The one schema of a simulator profile: every knob of the performance model with its default and
 * description. All durations and rates are in simulated (= real hardware) seconds; the time scale
 * is applied by the server, never by a profile.
 */

const batchPoint = z.object({
  batch: z.number().int().min(1).describe("running requests in the batch"),
  value: z.number().positive().describe("the quantity at that batch size"),
});

/** A quantity as a function of the running batch: points, linearly interpolated, flat beyond the ends. */
const batchCurve = z
  .array(batchPoint)
  .min(1)
  .refine((points) => points.every((p, i) => i === 0 || p.batch > points[i - 1].batch), {
    message: "points must be sorted by strictly increasing batch",
  });

const lengthDistribution = z
  .discriminatedUnion("distribution", [
    z.object({ distribution: z.literal("fixed"), tokens: z.number().int().min(0) }),
    z.object({ distribution: z.literal("uniform"), min: z.number().int().min(0), max: z.number().int().min(0) }),
    z.object({
      distribution: z.literal("lognormal"),
      median: z.number().positive(),
      sigma: z.number().nonnegative(),
      min: z.number().int().min(0).default(1),
      max: z.number().int().min(1),
    }),
  ])
  .describe("a token count drawn per request from a seeded generator");

export const profileSchema = z.object({
  description: z.string().describe("one line shown by `gpuhost sim --list`"),
  seed: z.number().int().default(1).describe("seed of every random draw (load time, reasoning and answer lengths)"),
  model: z.object({
    path: z.string().describe("the --model-path the server reports"),
    servedModelName: z.string().optional().describe("id in /v1/models and responses; default: the model path"),
    contextLength: z.number().int().positive().describe("prompt + max_tokens beyond this is a 400, as in SGLang"),
    weightsGB: z.number().positive().describe("size of the weights (reported, and used in load log lines)"),
    reasoningParser: z
      .string()
      .nullable()
      .default(null)
      .describe("--reasoning-parser; null: no reasoning_content ever"),
    toolCallParser: z.string().nullable().default(null).describe("--tool-call-parser (reported only)"),
    thinkingByDefault: z
      .boolean()
      .default(true)
      .describe("whether reasoning is on unless chat_template_kwargs.thinking is false"),
    reportReasoningTokens: z
      .boolean()
      .default(true)
      .describe("false reproduces SGLang builds that report usage.reasoning_tokens as 0 (PR #17156)"),
  }),
  hardware: z.object({
    gpu: z.string().describe("GPU name reported in server info"),
    count: z.number().int().positive().describe("GPUs (tp size)"),
    memoryGiBPerGpu: z.number().positive().describe("memory per GPU, for the OOM message and server info"),
  }),
  load: z.object({
    minSeconds: z.number().nonnegative().describe("shortest model load"),
    maxSeconds: z.number().nonnegative().describe("longest model load; each start draws uniformly in between (seeded)"),
    warmupSeconds: z
      .number()
      .nonnegative()
      .default(1)
      .describe("SGLang's startup warmup generation, during which /health is 503"),
  }),
  prefill: z.object({
    tokensPerSecond: z.number().positive().describe("prompt tokens per second of one request's prefill"),
    overheadSeconds: z.number().nonnegative().default(0).describe("fixed scheduling cost before the first token"),
  }),
  decode: z.object({
    perRequestTokensPerSecond: batchCurve.describe(
      "autoregressive decode rate of each request (forward steps per second) as a function of the running batch",
    ),
    maxRunningRequests: z.number().int().positive().describe("--max-running-requests: the rest wait in the queue"),
  }),
  speculative: z
    .object({
      algorithm: z.enum(ALGORITHMS).describe("--speculative-algorithm; its behaviour comes from drafts.<ALGORITHM>"),
      draftModelPath: z.string().optional().describe("--speculative-draft-model-path; default: the draft's own"),
      numSteps: z.number().int().positive().optional().describe("default: the draft's reference settings"),
      eagleTopk: z.number().int().positive().optional().describe("default: the draft's reference settings"),
      numDraftTokens: z.number().int().positive().optional().describe("default: the draft's reference settings"),
    })
    .nullable()
    .default(null)
    .describe("the speculative decoding this profile serves when started without SGLang flags; null: autoregressive"),
  drafts: z
    .object({ EAGLE3: draftModelSchema.optional(), DFLASH: draftModelSchema.optional() })
    .prefault({})
    .describe("how each draft model behaves on this host (see speculative.ts); flags choose which one runs"),
  reasoning: z
    .object({ tokens: lengthDistribution })
    .nullable()
    .default(null)
    .describe("reasoning length when thinking is on"),
  answer: z
    .object({ tokens: lengthDistribution.nullable().default(null) })
    .prefault({})
    .describe("answer length; null: the model writes until max_tokens (known-answer prompts excepted)"),
  memFractionStatic: z.number().min(0).max(1).default(0.85).describe("reported in server info"),
  enableMetrics: z.boolean().default(true).describe("--enable-metrics: /metrics is 404 without it"),
  faults: z.array(faultNameSchema).default([]).describe("faults always active for this profile"),
  faultSettings: faultSettingsSchema,
});

/** The speculative decoding a server runs: the algorithm, its effective flag settings and the draft's behaviour. */
export interface ResolvedSpeculative {
  algorithm: Algorithm;
  draftModelPath: string;
  numSteps: number;
  eagleTopk: number;
  numDraftTokens: number;
  draft: DraftModel;
}

export type Profile = Omit<z.infer<typeof profileSchema>, "speculative"> & {
  name: string;
  speculative: ResolvedSpeculative | null;
};

export interface SpeculativeRequest {
  algorithm: Algorithm;
  draftModelPath?: string;
  numSteps?: number;
  eagleTopk?: number;
  numDraftTokens?: number;
}

/**
 * The profile serving `request` (or autoregressive for null): what the stand-in `sglang` does with
 * --speculative-* flags. Unset settings take the draft's reference values, as SGLang picks defaults.
 */
export function withSpeculative(profile: Profile, request: SpeculativeRequest | null): Profile {
  if (request === null) return { ...profile, speculative: null };
  const draft = (profile.drafts as Partial<Record<Algorithm, DraftModel>>)[request.algorithm];
  if (!draft) {
    const known = Object.keys(profile.drafts).join(", ") || "none";
    throw new ProfileError(
      `profile ${profile.name} has no draft behaviour for ${request.algorithm} (drafts: ${known})`,
    );
  }
  return {
    ...profile,
    speculative: {
      algorithm: request.algorithm,
      draftModelPath: request.draftModelPath ?? draft.draftModelPath,
      numSteps: request.numSteps ?? draft.reference.numSteps,
      eagleTopk: request.eagleTopk ?? draft.reference.eagleTopk,
      numDraftTokens: request.numDraftTokens ?? draft.reference.numDraftTokens,
      draft,
    },
  };
}
export type LengthDistribution = z.infer<typeof lengthDistribution>;
export type BatchCurve = z.infer<typeof batchCurve>;

/** Shipped profiles live beside the sources; compiled code (dist/simulator) looks back at them. */
export function profilesDir(): string {
  return path.dirname(projectFile("simulator/profiles/tiny.yaml"));
}

export function listProfiles(): Array<{ name: string; description: string }> {
  const dir = profilesDir();
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith(".yaml"))
    .sort()
    .map((f) => {
      const profile = loadProfile(path.join(dir, f));
      return { name: profile.name, description: profile.description };
    });
}

/** `name` is a shipped profile name or a path to a YAML file. */
export function resolveProfilePath(name: string): string {
  if (name.includes("/") || name.includes(path.sep) || name.endsWith(".yaml") || name.endsWith(".yml"))
    return path.resolve(name);
  return path.join(profilesDir(), `${name}.yaml`);
}

export class ProfileError extends Error {}

export function loadProfile(name: string): Profile {
  const file = resolveProfilePath(name);
  if (!fs.existsSync(file)) {
    const known = fs.existsSync(profilesDir())
      ? fs.readdirSync(profilesDir()).map((f) => f.replace(/\.ya?ml$/, ""))
      : [];
    throw new ProfileError(`unknown simulator profile '${name}' (no ${file}); shipped: ${known.join(", ")}`);
  }
  return parseProfile(readRaw(file, []), path.basename(file).replace(/\.ya?ml$/, ""), file);
}

/**
 * The YAML of a profile, with `extends: NAME` resolved: the named profile's YAML is the base and
 * this file's keys replace or (for objects) merge into it, so a variant repeats no measured number.
 */
function readRaw(file: string, chain: string[]): unknown {
  if (chain.includes(file))
    throw new ProfileError(`profile ${file}: extends itself (${[...chain, file].join(" -> ")})`);
  let raw: unknown;
  try {
    raw = parseYaml(fs.readFileSync(file, "utf8"));
  } catch (err) {
    throw new ProfileError(`profile ${file}: not valid YAML: ${(err as Error).message}`);
  }
  if (raw === null || typeof raw !== "object" || Array.isArray(raw) || !("extends" in raw)) return raw;
  const { extends: base, ...own } = raw as Record<string, unknown>;
  if (typeof base !== "string")
    throw new ProfileError(`profile ${file} is invalid:\n  extends: must be a profile name`);
  const baseFile = resolveProfilePath(base);
  if (!fs.existsSync(baseFile)) throw new ProfileError(`profile ${file}: extends unknown profile '${base}'`);
  return merge(readRaw(baseFile, [...chain, file]), own);
}

function merge(base: unknown, over: unknown): unknown {
  if (!isObject(base) || !isObject(over)) return over;
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) out[k] = k in out ? merge(out[k], v) : v;
  return out;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

export function parseProfile(raw: unknown, name: string, source = name): Profile {
  const result = profileSchema.safeParse(raw);
  if (!result.success) {
    const lines = result.error.issues.map((issue) => `  ${fieldPath(issue.path)}: ${issue.message}`);
    throw new ProfileError(`profile ${source} is invalid:\n${lines.join("\n")}`);
  }
  const p = result.data;
  if (p.load.maxSeconds < p.load.minSeconds)
    throw new ProfileError(`profile ${source} is invalid:\n  load.maxSeconds: must be >= load.minSeconds`);
  const parsed = { ...p, name, speculative: null } as Profile;
  try {
    return p.speculative ? withSpeculative(parsed, p.speculative) : parsed;
  } catch (err) {
    throw new ProfileError(`profile ${source} is invalid:\n  speculative.algorithm: ${(err as Error).message}`);
  }
}

function fieldPath(parts: ReadonlyArray<PropertyKey>): string {
  if (parts.length === 0) return "(root)";
  return parts.map((p, i) => (typeof p === "number" ? `[${p}]` : `${i === 0 ? "" : "."}${String(p)}`)).join("");
}
