/**
 * The flags that put a model on a host (`--gpu --gpus --model-config --context-tokens
 * --mem-fraction-static`), shared by `gpuhost plan` and `gpuhost compare`, and the one reading of
 * them: the catalogue entry and the model's facts, or undefined when neither --gpu nor
 * --model-config is given. Bad values are refused in one sentence naming the flag.
 */
import * as fs from "node:fs/promises";
import { findGpu, GPU_NAMES } from "../physics/gpus";
import { modelFacts, ModelConfigError, type ModelFacts } from "../physics/model-config";
import { DEFAULT_MEM_FRACTION_STATIC, type HostShape } from "../physics/roofline";
import { UsageError } from "./common";
import type { FlagTable } from "./options";

export const PHYSICS_FLAGS = {
  gpu: {
    type: "string",
    value: "NAME",
    description: `the host's GPU: ${GPU_NAMES.join(", ")} (or how nvidia-smi names one of them)`,
  },
  gpus: {
    type: "integer",
    max: 64,
    description: "GPUs the model is served on (tensor parallel)",
    shownDefault: () => "1",
  },
  "model-config": { type: "path", description: "the model's Hugging Face config.json (with --gpu: the roofline)" },
  "context-tokens": {
    type: "integer",
    description: "tokens of context per sequence for the KV-cache and compute bounds",
    shownDefault: () => "the output tokens per completion",
  },
  "mem-fraction-static": {
    type: "fraction",
    value: "F",
    description: "SGLang's --mem-fraction-static: the share of GPU memory for weights and KV cache",
    default: DEFAULT_MEM_FRACTION_STATIC,
  },
} as const satisfies FlagTable;

export interface PhysicsValues {
  gpu?: string;
  gpus?: number;
  "model-config"?: string;
  "context-tokens"?: number;
  "mem-fraction-static": number;
}

/** The model and host the flags name; undefined without --gpu and --model-config. */
export async function hostPhysics(
  values: PhysicsValues,
  outputTokens: number,
  /** Other flags that mean nothing without the roofline (plan's --concurrency). */
  dependents: Record<string, unknown> = {},
): Promise<{ model: ModelFacts; host: HostShape } | undefined> {
  const file = values["model-config"];
  const gpuName = values.gpu;
  if (file === undefined || gpuName === undefined) {
    const given = {
      gpu: gpuName,
      "model-config": file,
      gpus: values.gpus,
      "context-tokens": values["context-tokens"],
      ...dependents,
    };
    for (const [flag, v] of Object.entries(given))
      if (v !== undefined)
        throw new UsageError(`--${flag} needs --gpu and --model-config: the roofline is a model on a host`);
    return undefined;
  }
  const gpu = findGpu(gpuName);
  if (!gpu) throw new UsageError(`--gpu takes one of ${GPU_NAMES.join(", ")}, got ${JSON.stringify(gpuName)}`);
  const fraction = values["mem-fraction-static"];
  if (fraction <= 0 || fraction >= 1)
    throw new UsageError(`--mem-fraction-static takes a fraction above 0 and below 1, got ${fraction}`);
  return {
    model: await readModelConfig(file),
    host: {
      gpu,
      gpus: values.gpus ?? 1,
      memFractionStatic: fraction,
      contextTokens: values["context-tokens"] ?? outputTokens,
    },
  };
}

async function readModelConfig(file: string): Promise<ModelFacts> {
  let text: string;
  try {
    text = await fs.readFile(file, "utf8");
  } catch (err) {
    throw new UsageError(
      `--model-config ${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new UsageError(`--model-config ${file} is not JSON`);
  }
  try {
    return modelFacts(json);
  } catch (err) {
    if (err instanceof ModelConfigError) throw new UsageError(`--model-config ${file}: ${err.message}`);
    throw err;
  }
}
