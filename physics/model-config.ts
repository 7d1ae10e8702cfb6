/**
 * A model's facts from its Hugging Face config.json: parameters by part (attention, dense MLP,
 * routed and shared experts, router, lm_head), the attention kind with its ranks, and how each part
 * is stored (quantized or in the model's dtype). The file is not gpuhost's, so keys it does not read
 * pass; the keys it reads are validated, and a config it cannot size (an unknown quantization
 * method, no layer count) is refused in one sentence naming the key.
 */
import { z } from "zod";

const count = z.number().int().positive();

const QuantizationSchema = z.looseObject({ quant_method: z.string() });

/** Only the keys read here; DeepSeek-V3 (Kimi K2), Llama, Qwen and Mixtral spell them so. */
const TextConfigSchema = z.looseObject({
  model_type: z.string().optional(),
  architectures: z.array(z.string()).optional(),
  hidden_size: count,
  num_hidden_layers: count,
  num_attention_heads: count,
  num_key_value_heads: count.optional(),
  head_dim: count.nullish(),
  intermediate_size: count,
  vocab_size: count,
  tie_word_embeddings: z.boolean().optional(),
  torch_dtype: z.enum(["bfloat16", "float16", "float32"]).optional(),
  dtype: z.enum(["bfloat16", "float16", "float32"]).optional(),
  // Mixture of experts: DeepSeek's names, then Mixtral's and Qwen's.
  n_routed_experts: count.nullish(),
  num_local_experts: count.nullish(),
  num_experts: count.nullish(),
  num_experts_per_tok: count.nullish(),
  n_shared_experts: z.number().int().min(0).nullish(),
  moe_intermediate_size: count.nullish(),
  shared_expert_intermediate_size: z.number().int().min(0).nullish(),
  first_k_dense_replace: z.number().int().min(0).nullish(),
  moe_layer_freq: count.nullish(),
  // Multi-head latent attention (DeepSeek-V2/V3, Kimi K2).
  kv_lora_rank: count.nullish(),
  q_lora_rank: count.nullish(),
  qk_rope_head_dim: count.nullish(),
  qk_nope_head_dim: count.nullish(),
  v_head_dim: count.nullish(),
  quantization_config: QuantizationSchema.optional(),
});
type TextConfig = z.infer<typeof TextConfigSchema>;

/** A multimodal config (Kimi K2.5 and later) keeps the language model under text_config. */
const ConfigFileSchema = z.looseObject({
  text_config: z.looseObject({}).optional(),
  quantization_config: QuantizationSchema.optional(),
});

export class ModelConfigError extends Error {}

export type PartName =
  "embedding" | "attention" | "norms" | "denseMlp" | "routedExperts" | "sharedExperts" | "router" | "lmHead";

export interface WeightPart {
  name: PartName;
  /** Parameters the part holds in memory. */
  params: number;
  /** Parameters a decode step reads for one token (the embedding: one row; the experts: the active ones). */
  activeParams: number;
  /** Bytes per parameter as stored, quantization scales included. */
  bytesPerParam: number;
  /** How it is stored, e.g. "int4 group 32 (compressed-tensors)" or "bfloat16". */
  storage: string;
}

export type Attention =
  | { kind: "MHA" | "GQA" | "MQA"; heads: number; kvHeads: number; headDim: number }
  | {
      kind: "MLA";
      heads: number;
      qLoraRank: number | null;
      kvLoraRank: number;
      ropeHeadDim: number;
      nopeHeadDim: number;
      vHeadDim: number;
    };

export interface Moe {
  routedExperts: number;
  activePerToken: number;
  sharedExperts: number;
  /** Parameters of one routed expert (gate, up and down projections). */
  expertParams: number;
  moeLayers: number;
  denseLayers: number;
}

export interface ModelFacts {
  architecture: string;
  layers: number;
  hidden: number;
  vocab: number;
  tiedEmbeddings: boolean;
  dtype: "bfloat16" | "float16" | "float32";
  attention: Attention;
  moe: Moe | null;
  quantization: string | null;
  parts: WeightPart[];
}

const DTYPE_BYTES = { bfloat16: 2, float16: 2, float32: 4 } as const;

function attentionOf(c: TextConfig): { attention: Attention; params: number; norms: number } {
  const h = c.hidden_size;
  const heads = c.num_attention_heads;
  if (c.kv_lora_rank) {
    const [rope, nope, v] = [c.qk_rope_head_dim, c.qk_nope_head_dim, c.v_head_dim];
    if (!rope || !nope || !v)
      throw new ModelConfigError(
        "config.json has kv_lora_rank (MLA) but not all of qk_rope_head_dim, qk_nope_head_dim and v_head_dim",
      );
    const q = c.q_lora_rank ?? null;
    const qk = heads * (nope + rope);
    const params =
      (q === null ? h * qk : h * q + q * qk) + // q_a_proj and q_b_proj, or q_proj
      h * (c.kv_lora_rank + rope) + // kv_a_proj_with_mqa: the latent and the shared rope key
      c.kv_lora_rank * heads * (nope + v) + // kv_b_proj
      heads * v * h; // o_proj
    return {
      attention: {
        kind: "MLA",
        heads,
        qLoraRank: q,
        kvLoraRank: c.kv_lora_rank,
        ropeHeadDim: rope,
        nopeHeadDim: nope,
        vHeadDim: v,
      },
      params,
      norms: (q ?? 0) + c.kv_lora_rank, // q_a_layernorm, kv_a_layernorm
    };
  }
  const kvHeads = c.num_key_value_heads ?? heads;
  const headDim = c.head_dim ?? h / heads;
  if (!Number.isInteger(headDim))
    throw new ModelConfigError("config.json has no head_dim and hidden_size is not a multiple of num_attention_heads");
  const kind = kvHeads === heads ? "MHA" : kvHeads === 1 ? "MQA" : "GQA";
  // q and o: heads x head_dim each way; k and v: kv heads x head_dim.
  return {
    attention: { kind, heads, kvHeads, headDim },
    params: 2 * h * heads * headDim + 2 * h * kvHeads * headDim,
    norms: 0,
  };
}

function moeOf(c: TextConfig): Moe | null {
  const routed = c.n_routed_experts ?? c.num_local_experts ?? c.num_experts ?? 0;
  if (routed === 0) return null;
  if (!c.num_experts_per_tok) throw new ModelConfigError("config.json has routed experts but no num_experts_per_tok");
  const expertIntermediate = c.moe_intermediate_size ?? c.intermediate_size;
  const firstDense = c.first_k_dense_replace ?? 0;
  const freq = c.moe_layer_freq ?? 1;
  let moeLayers = 0;
  for (let l = 0; l < c.num_hidden_layers; l++) if (l >= firstDense && (l - firstDense) % freq === 0) moeLayers++;
  // Qwen gives its shared expert its own width; DeepSeek counts shared experts of the routed width.
  const sharedWidth = c.shared_expert_intermediate_size ?? (c.n_shared_experts ?? 0) * expertIntermediate;
  return {
    routedExperts: routed,
    activePerToken: c.num_experts_per_tok,
    sharedExperts: sharedWidth / expertIntermediate,
    expertParams: 3 * c.hidden_size * expertIntermediate,
    moeLayers,
    denseLayers: c.num_hidden_layers - moeLayers,
  };
}

/** A representative module name per part, as quantizers name them in their ignore lists. */
function moduleName(part: PartName, c: TextConfig, moe: Moe | null): string | null {
  const moeLayer = moe ? c.num_hidden_layers - 1 : 0;
  const mixtral = c.model_type === "mixtral";
  switch (part) {
    case "attention":
      return `model.layers.${moeLayer}.self_attn.o_proj`;
    case "denseMlp":
      return `model.layers.0.mlp.down_proj`;
    case "routedExperts":
      return mixtral
        ? `model.layers.${moeLayer}.block_sparse_moe.experts.0.w2`
        : `model.layers.${moeLayer}.mlp.experts.0.down_proj`;
    case "sharedExperts":
      return c.shared_expert_intermediate_size
        ? `model.layers.${moeLayer}.mlp.shared_expert.down_proj`
        : `model.layers.${moeLayer}.mlp.shared_experts.down_proj`;
    case "lmHead":
      return "lm_head";
    // Embeddings, norms and the router gate are no Linear layers a weight quantizer replaces.
    case "embedding":
    case "norms":
    case "router":
      return null;
  }
}

/** Python's re.match: anchored at the start only. */
function matches(pattern: string, name: string): boolean {
  if (!pattern.startsWith("re:")) return pattern === name || pattern === "Linear";
  try {
    return new RegExp(`^(?:${pattern.slice(3)})`).test(name);
  } catch {
    throw new ModelConfigError(`quantization_config has a pattern JavaScript cannot read: ${JSON.stringify(pattern)}`);
  }
}

interface Quantizer {
  label: string;
  /** Bytes per parameter of a module, or null where it stays in the model's dtype. */
  bytesFor(name: string): number | null;
}

const CompressedTensorsSchema = z.looseObject({
  config_groups: z.record(
    z.string(),
    z.looseObject({
      targets: z.array(z.string()),
      weights: z
        .looseObject({
          num_bits: count,
          group_size: count.nullish(),
          type: z.enum(["int", "float"]),
          symmetric: z.boolean().optional(),
        })
        .nullish(),
    }),
  ),
  ignore: z.array(z.string()).default([]),
});

function parseQuant<T extends z.ZodType>(schema: T, q: unknown, method: string): z.infer<T> {
  const r = schema.safeParse(q);
  if (!r.success) {
    const i = r.error.issues[0];
    throw new ModelConfigError(
      `config.json's quantization_config (${method}) ${i ? `at ${i.path.map(String).join(".") || "its top"}: ${i.message}` : "is malformed"}`,
    );
  }
  return r.data;
}

function quantizerOf(q: Quantization | undefined): Quantizer | null {
  if (!q) return null;
  const method = q.quant_method;
  switch (method) {
    case "compressed-tensors":
      return compressedTensorsQuantizer(q);
    case "fp8":
      return fp8Quantizer(q);
    case "awq":
    case "gptq":
      return intQuantizer(q, method);
    case "mxfp4":
      return mxfp4Quantizer(q);
    default:
      throw new ModelConfigError(
        `config.json's quantization_config.quant_method ${JSON.stringify(method)} is not one gpuhost can size (compressed-tensors, fp8, awq, gptq, mxfp4)`,
      );
  }
}

type Quantization = z.infer<typeof QuantizationSchema>;

/** compressed-tensors: each config group's weights, by target; the ignored modules stay unquantized. */
function compressedTensorsQuantizer(q: Quantization): Quantizer {
  const method = "compressed-tensors";
  const ct = parseQuant(CompressedTensorsSchema, q, method);
  const groups = Object.values(ct.config_groups).flatMap((g) => (g.weights ? [{ ...g, weights: g.weights }] : []));
  const w0 = groups[0]?.weights;
  return {
    label: w0 ? `${w0.type}${w0.num_bits} group ${w0.group_size ?? "per-channel"} (compressed-tensors)` : method,
    bytesFor(name) {
      if (ct.ignore.some((p) => matches(p, name))) return null;
      const w = groups.find((g) => g.targets.some((t) => matches(t, name)))?.weights;
      if (!w) return null;
      // One BF16 scale per group (and a packed zero point per group when asymmetric).
      const perGroup = 2 + (w.symmetric === false ? w.num_bits / 8 : 0);
      return w.num_bits / 8 + (w.group_size ? perGroup / w.group_size : 0);
    },
  };
}

/** fp8: one byte a weight, one float32 scale per block where blocks are given. */
function fp8Quantizer(q: Quantization): Quantizer {
  const f = parseQuant(
    z.looseObject({
      weight_block_size: z.array(count).length(2).nullish(),
      modules_to_not_convert: z.array(z.string()).nullish(),
    }),
    q,
    "fp8",
  );
  const block = f.weight_block_size ? f.weight_block_size[0] * f.weight_block_size[1] : null;
  return {
    label: `fp8${block ? ` block ${f.weight_block_size?.join("x")}` : ""}`,
    bytesFor: (name) =>
      name === "lm_head" || (f.modules_to_not_convert ?? []).some((m) => name.includes(m))
        ? null
        : 1 + (block ? 4 / block : 0), // one float32 scale per block
  };
}

/** awq and gptq: integer weights of their bits, in groups. */
function intQuantizer(q: Quantization, method: "awq" | "gptq"): Quantizer {
  const a = parseQuant(
    z.looseObject({
      bits: count.optional(),
      w_bit: count.optional(),
      group_size: z.number().int().optional(),
      q_group_size: count.optional(),
    }),
    q,
    method,
  );
  const bits = a.bits ?? a.w_bit;
  const group = a.group_size ?? a.q_group_size;
  if (!bits) throw new ModelConfigError(`config.json's quantization_config (${method}) has no bits`);
  const g = group && group > 0 ? group : null;
  return {
    label: `int${bits} group ${g ?? "per-channel"} (${method})`,
    // An FP16 scale and a packed zero point per group; lm_head stays unquantized.
    bytesFor: (name) => (name === "lm_head" ? null : bits / 8 + (g ? (2 + bits / 8) / g : 0)),
  };
}

/** mxfp4: the experts only. */
function mxfp4Quantizer(q: Quantization): Quantizer {
  const m = parseQuant(z.looseObject({ modules_to_not_convert: z.array(z.string()).nullish() }), q, "mxfp4");
  return {
    label: "mxfp4 (experts)",
    // FP4 values and one E8M0 scale per 32; only the experts are converted.
    bytesFor: (name) =>
      name.includes(".experts.") && !(m.modules_to_not_convert ?? []).some((x) => name.includes(x))
        ? 0.5 + 1 / 32
        : null,
  };
}

/** The facts of a parsed config.json object. */
export function modelFacts(json: unknown): ModelFacts {
  const c = textConfigOf(json);
  const dtype = c.torch_dtype ?? c.dtype ?? "bfloat16";
  const shape = { dtype, attention: attentionOf(c), moe: moeOf(c), quantizer: quantizerOf(c.quantization_config) };
  const { moe, quantizer } = shape;
  return {
    architecture: c.architectures?.[0] ?? c.model_type ?? "unknown",
    layers: c.num_hidden_layers,
    hidden: c.hidden_size,
    vocab: c.vocab_size,
    tiedEmbeddings: c.tie_word_embeddings ?? false,
    dtype,
    attention: shape.attention.attention,
    moe,
    quantization: quantizer?.label ?? null,
    parts: weightParts(c, shape),
  };
}

/** The model's text config (a multimodal config's text_config, with the file's quantization), or the error naming the key. */
function textConfigOf(json: unknown): TextConfig {
  const file = ConfigFileSchema.safeParse(json);
  if (!file.success) throw new ModelConfigError("config.json is not a JSON object of a Hugging Face model config");
  const raw = file.data.text_config
    ? {
        ...file.data.text_config,
        quantization_config: file.data.quantization_config ?? file.data.text_config.quantization_config,
      }
    : file.data;
  const parsed = TextConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const i = parsed.error.issues[0];
    const where = `${file.data.text_config ? "text_config." : ""}${i?.path.map(String).join(".") ?? ""}`;
    throw new ModelConfigError(`config.json's ${where}: ${i?.message ?? "invalid"}`);
  }
  return parsed.data;
}

/** The weights by part: parameters held and read per token, each at its stored bytes (quantized or the dtype). */
function weightParts(
  c: TextConfig,
  shape: {
    dtype: ModelFacts["dtype"];
    attention: ReturnType<typeof attentionOf>;
    moe: ReturnType<typeof moeOf>;
    quantizer: Quantizer | null;
  },
): WeightPart[] {
  const { dtype, moe, quantizer } = shape;
  const { params: attentionPerLayer, norms: attentionNorms } = shape.attention;
  const h = c.hidden_size;
  const layers = c.num_hidden_layers;
  const denseLayers = moe ? moe.denseLayers : layers;
  const sharedParams = moe ? moe.sharedExperts * moe.expertParams : 0;
  const tied = c.tie_word_embeddings ?? false;
  const part = (name: PartName, params: number, activeParams: number): WeightPart => {
    const module = moduleName(name, c, moe);
    const q = module === null || quantizer === null ? null : quantizer.bytesFor(module);
    return {
      name,
      params,
      activeParams,
      bytesPerParam: q ?? DTYPE_BYTES[dtype],
      storage: q === null ? dtype : (quantizer?.label ?? dtype),
    };
  };
  const attentionParams = layers * attentionPerLayer;
  // input_layernorm and post_attention_layernorm per layer, MLA's two, and the final norm.
  const normParams = layers * (2 * h + attentionNorms) + h;
  const denseMlpParams = denseLayers * 3 * h * c.intermediate_size;
  return [
    part("embedding", c.vocab_size * h, h),
    part("attention", attentionParams, attentionParams),
    part("norms", normParams, normParams),
    part("denseMlp", denseMlpParams, denseMlpParams),
    ...(moe
      ? [
          part(
            "routedExperts",
            moe.moeLayers * moe.routedExperts * moe.expertParams,
            moe.moeLayers * moe.activePerToken * moe.expertParams,
          ),
          part("sharedExperts", moe.moeLayers * sharedParams, moe.moeLayers * sharedParams),
          part("router", moe.moeLayers * moe.routedExperts * h, moe.moeLayers * moe.routedExperts * h),
        ]
      : []),
    // Tied: the head is the embedding matrix, held once but read whole each step.
    part("lmHead", tied ? 0 : c.vocab_size * h, c.vocab_size * h),
  ];
}
