// SGLang's own argument parser (the pinned release, installed by setup-venv.sh) judges every unit the
// committed stacks render, the simulator's flag table, and the schema's parser lists. torch and triton
// are inert stand-ins (standin/gpuhost_inert.py): parsing never runs a tensor, and PyPI's torch does
// not import without its ~4 GB of CUDA wheels.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../stack/config";
import { API_KEY_CREDENTIAL, serverArgsFor, sglangArgv } from "../../components/services/launch-args";
import { REASONING_PARSERS, TOOL_CALL_PARSERS } from "../../components/services/sglang-choices";
import * as choices from "../../components/services/sglang-choices";
import { credentialName } from "../../components/services/systemd-syntax";
import { ArgparseError, FLAGS, parseSglangArgs } from "../../simulator/sglang-args";
import { stackConfig } from "../config/stacks";
import { API_KEY, unitsOf } from "../services/render";
import { run, runOk } from "../support/run";

const HERE = __dirname;
const ROOT = path.resolve(HERE, "..", "..");
const STACKS = ["sim", "testhost", "story"] as const;

interface Verdict {
  name: string;
  ok: boolean;
  error?: string;
  args?: Record<string, string | number | boolean | null>;
}
interface SglangFlag {
  options: string[];
  dest: string;
  kind: "bool" | "value";
  type: string | null;
  choices: string[] | null;
}

let python = "";
let credentialDir = "";
// GPUHOST_SGLANG_VENV: judge with another environment holding the same SGLang, e.g. one with PyPI's
// real torch and its CUDA wheels: the stand-ins then stay off the path.
const OWN_VENV = process.env.GPUHOST_SGLANG_VENV;

/** One request to parse_units.py, answered by SGLang's parser. */
async function sglang<T>(request: object): Promise<T> {
  const r = await run(python, [path.join(HERE, "parse_units.py")], {
    input: JSON.stringify(request),
    env: { ...process.env, PYTHONPATH: OWN_VENV ? "" : path.join(HERE, "standin"), PYTHONDONTWRITEBYTECODE: "1" },
    timeout: 120_000,
  });
  if (r.status !== 0) throw new Error(`parse_units.py failed (${r.status ?? r.signal}): ${r.stderr.slice(-2000)}`);
  return JSON.parse(r.stdout) as T;
}
const judge = (units: Array<{ name: string; argv: string[]; resolve?: boolean }>) =>
  sglang<{ units: Verdict[] }>({ units }).then((r) => r.units);

/** The words of an ExecStart= value as systemd splits them (the quoting quoteExecWord writes). */
function execWords(line: string): string[] {
  const words = line.match(/"(?:[^"\\]|\\.)*"|\S+/g) ?? [];
  return words.map((w) =>
    w.startsWith('"')
      ? w
          .slice(1, -1)
          .replace(/\\x([0-9a-f]{2})|\\(.)/g, (_, hex: string | undefined, ch: string) =>
            hex ? String.fromCharCode(parseInt(hex, 16)) : (({ n: "\n", t: "\t" } as Record<string, string>)[ch] ?? ch),
          )
          .replace(/\$\$/g, "$")
      : w,
  );
}

/** SGLang's flags of a rendered unit: what follows the program, with the credential folder filled in. */
function unitFlags(content: string): string[] {
  const line = /^ExecStart=(.*)$/m.exec(content)?.[1];
  if (!line) throw new Error("unit without ExecStart=");
  const words = execWords(line).map((w) => w.replace(/^%d\//, `${credentialDir}/`));
  const at = words.findIndex((w) => w === "sglang.launch_server" || w.endsWith("/sglang.js"));
  if (at < 0) throw new Error(`ExecStart runs neither SGLang nor the simulator: ${line}`);
  return words.slice(at + 1);
}

beforeAll(async () => {
  // Once per machine (the cache), minutes the first time: see README "Development".
  const venv =
    OWN_VENV ??
    (await runOk("bash", [path.join(HERE, "setup-venv.sh")], { timeout: 1_500_000, inheritStderr: true }))
      .trim()
      .split("\n")
      .pop()!;
  python = path.join(venv, "bin", "python");
  // The API key file as the host gets it (the real script, under a root folder), named as the unit's
  // credential: SGLang's --config needs the .yaml suffix.
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-sglang-"));
  credentialDir = path.join(root, "credentials");
  await runOk(
    "bash",
    [
      path.join(ROOT, "components/services/scripts/api-key-file.sh"),
      `/credentials/${credentialName(API_KEY_CREDENTIAL)}`,
    ],
    { input: `${API_KEY}\n`, env: { ...process.env, GPUHOST_ROOT: root } },
  );
}, 1_600_000);

describe("SGLang 0.5.23's own parser (torch, triton: inert stand-ins) accepts every unit the stacks render", () => {
  const cases = STACKS.flatMap((stack) =>
    [false, true].flatMap((apiKey) =>
      unitsOf(stack, { platform: "real", apiKey }).map((u) => ({ stack, apiKey, kind: u.kind, content: u.content })),
    ),
  );

  it("sim, testhost and story; autoregressive, EAGLE-3 and DFlash; with and without the API key", async () => {
    expect(new Set(cases.map((c) => c.kind))).toEqual(new Set(["autoregressive", "eagle3", "dflash"]));
    const verdicts = await judge(
      cases.map((c) => ({ name: `${c.stack}/${c.kind}/${c.apiKey ? "key" : "nokey"}`, argv: unitFlags(c.content) })),
    );
    expect(verdicts.filter((v) => !v.ok)).toEqual([]);
    for (const [i, c] of cases.entries()) {
      // What SGLang read is what the stack says.
      const s = parseConfig(stackConfig(c.stack, c.apiKey ? { apiKey: API_KEY } : {})).services;
      const typed = serverArgsFor(c.kind, s, { apiKey: c.apiKey });
      const spec = typed.speculative;
      expect(verdicts[i].args, verdicts[i].name).toMatchObject({
        model_path: typed.modelPath,
        served_model_name: typed.servedModelName ?? null,
        trust_remote_code: typed.trustRemoteCode,
        host: typed.host,
        port: typed.port,
        tp_size: typed.tp,
        mem_fraction_static: typed.memFractionStatic ?? null,
        reasoning_parser: typed.reasoningParser ?? null,
        tool_call_parser: typed.toolCallParser ?? null,
        enable_metrics: typed.enableMetrics,
        api_key: c.apiKey ? API_KEY : null,
        speculative_algorithm: spec?.algorithm ?? null,
        speculative_draft_model_path: spec?.draftModelPath ?? null,
        speculative_num_steps: spec?.numSteps ?? null,
        speculative_eagle_topk: spec?.eagleTopk ?? null,
        speculative_num_draft_tokens: spec?.numDraftTokens ?? null,
        speculative_dflash_block_size: spec?.dflashBlockSize ?? null,
      });
    }
  });

  it("the simulated host's units carry the same SGLang flags as a real host's", () => {
    for (const real of unitsOf("sim", { platform: "real" })) {
      const sim = unitsOf("sim", { platform: "simulated" }).find((u) => u.kind === real.kind)!;
      expect(unitFlags(sim.content)).toEqual(unitFlags(real.content));
    }
  });
});

/** The value after `flag` replaced (the unit's own words otherwise). */
const withValue = (argv: string[], flag: string, value: string) =>
  argv.map((w, i) => (i > 0 && argv[i - 1] === flag ? value : w));

// Resolution (ServerArgs.resolve_once, what launch_server runs after parsing) reads the model's
// config and imports SGLang's model layers: it needs the real torch, so it runs only with a full
// environment (GPUHOST_SGLANG_VENV; measured with PyPI's torch 2.14.1 and its CUDA wheels, 6.0 GB).
describe.skipIf(!OWN_VENV)("with a full SGLang environment (GPUHOST_SGLANG_VENV): resolution on CPU", () => {
  let models = "";
  beforeAll(() => {
    // Tiny configs in place of the weights (resolution reads config.json only): a Llama target and
    // an EAGLE-3 draft.
    models = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-sglang-models-"));
    const llama = {
      architectures: ["LlamaForCausalLM"],
      model_type: "llama",
      hidden_size: 64,
      intermediate_size: 128,
      num_attention_heads: 4,
      num_key_value_heads: 4,
      num_hidden_layers: 2,
      vocab_size: 1000,
      max_position_embeddings: 2048,
      rms_norm_eps: 1e-5,
      torch_dtype: "bfloat16",
    };
    for (const [dir, config] of [
      ["target", llama],
      ["draft", { ...llama, architectures: ["LlamaForCausalLMEagle3"], num_hidden_layers: 1 }],
    ] as const) {
      fs.mkdirSync(path.join(models, dir));
      fs.writeFileSync(path.join(models, dir, "config.json"), JSON.stringify(config));
    }
  });

  it("the story's units resolve with --device cpu added (DFlash: SGLang runs it on CUDA only)", async () => {
    const units = unitsOf("story", { platform: "real" }).map((u) => {
      let argv = withValue(unitFlags(u.content), "--model-path", path.join(models, "target"));
      argv = withValue(argv, "--speculative-draft-model-path", path.join(models, "draft"));
      return { name: u.kind, argv: [...argv, "--device", "cpu"], resolve: true };
    });
    const [ar, eagle3, dflash] = await judge(units);
    expect([ar.ok, eagle3.ok]).toEqual([true, true]);
    expect(dflash.error).toBe(
      "resolve: ValueError: DFLASH speculative decoding is not supported by SRTPlatform on device 'cpu'.",
    );
  });

  it("a partial speculative set, which the schema refuses, crashes SGLang's resolution", async () => {
    const [partial] = await judge([
      {
        name: "partial",
        argv: [
          ...["--model-path", path.join(models, "target"), "--device", "cpu", "--speculative-algorithm", "EAGLE3"],
          ...["--speculative-draft-model-path", path.join(models, "draft"), "--speculative-num-steps", "3"],
        ],
        resolve: true,
      },
    ]);
    expect(partial.error).toMatch(/^resolve: TypeError: '>' not supported between instances of 'NoneType' and 'int'/);
  });
});

describe("a unit SGLang's parser refuses fails at preview: gpuhost's schema refuses its config first", () => {
  const story = stackConfig("story") as { services: Record<string, unknown> };
  const typo = (key: "reasoningParser" | "toolCallParser") => ({ ...story.services, [key]: "kimi-k2" });

  it.each(["reasoningParser", "toolCallParser"] as const)("services.%s outside SGLang's list", async (key) => {
    // SGLang's verdict on the flags such a config would render (built past the schema on purpose).
    const services = { ...parseConfig(story).services, [key]: "kimi-k2" };
    const [verdict] = await judge([
      { name: key, argv: sglangArgv(serverArgsFor("autoregressive", services, { apiKey: false })).map(String) },
    ]);
    expect(verdict.ok).toBe(false);
    expect(verdict.error).toMatch(/invalid choice: 'kimi-k2'/);
    expect(() => parseConfig({ ...story, services: typo(key) })).toThrow(
      new RegExp(`gpuhost:services\\.${key}.*must be one of the pinned SGLang's choices`),
    );
  });

  it("what SGLang's parser refuses, the simulator refuses with SGLang's words", async () => {
    const refused = [
      ["--model-path", "m", "--speculative-dflash-blocksize", "16"],
      ["--model-path", "m", "--tp", "two"],
      ["--model-path", "m", "--port"],
      ["--model-path", "m", "--enable-metrics=1"],
      ["--model-path", "m", "--dtype", "fp64"],
      ["--model-path", "m", "--reasoning-parser", "kimi-k2"],
      ["--model-path", "m", "--context-length", "32kb"],
      ["--model-path", "m", "--context-length", "1.5Ki"],
      ["--port", "1"],
    ];
    const verdicts = await judge(refused.map((argv, i) => ({ name: String(i), argv })));
    for (const [i, argv] of refused.entries()) {
      expect(verdicts[i].ok, argv.join(" ")).toBe(false);
      let simulator = "";
      try {
        parseSglangArgs(argv);
      } catch (e) {
        expect(e).toBeInstanceOf(ArgparseError);
        simulator = (e as Error).message;
      }
      expect(verdicts[i].error).toBe(`sglang serve: error: ${simulator}`);
    }
  });
});

describe("the simulator's stand-in sglang knows only SGLang's flags, with SGLang's types and choices", () => {
  let flags: Map<string, SglangFlag>;
  beforeAll(async () => {
    flags = new Map((await sglang<{ flags: SglangFlag[] }>({ flags: true })).flags.map((f) => [f.dest, f]));
  });
  const typeOf = (f: SglangFlag) =>
    f.kind === "bool" ? "bool" : f.type === "human_readable_int" ? "human_int" : (f.type ?? "str");

  it.each(FLAGS.map((f) => [f.dest, f] as const))("%s", (dest, spec) => {
    const real = flags.get(dest);
    expect(real, `SGLang has no --${dest.replace(/_/g, "-")}`).toBeDefined();
    const primary = `--${dest.replace(/_/g, "-")}`;
    expect(real!.options).toEqual([primary, ...(spec.aliases ?? [])]);
    expect(typeOf(real!)).toBe(spec.kind);
    expect(spec.choices ?? null).toEqual(real!.choices);
  });

  it("the simulator's abbreviations (--tp, --dp) reach their flag in SGLang's parser too", async () => {
    const abbreviated = FLAGS.flatMap((f) => (f.abbreviations ?? []).map((a) => ({ dest: f.dest, flag: a })));
    expect(abbreviated.length).toBeGreaterThan(0);
    const verdicts = await judge(abbreviated.map((a) => ({ name: a.flag, argv: ["--model-path", "m", a.flag, "8"] })));
    expect(verdicts.filter((v) => !v.ok)).toEqual([]);
    for (const [i, a] of abbreviated.entries()) expect(verdicts[i].args?.[a.dest], a.flag).toBe(8);
  });

  it("the test host's stand-in python sglang declares only SGLang's flags, with their types", () => {
    const src = fs.readFileSync(path.join(ROOT, "test/testhost/standin-python/sglang/sglang/launch_server.py"), "utf8");
    const declared = [...src.matchAll(/add_argument\("(--[a-z-]+)"(?:,[^)]*?type=(\w+))?/g)];
    expect(declared.length).toBeGreaterThan(0);
    for (const [, option, type] of declared) {
      const real = [...flags.values()].find((f) => f.options.includes(option));
      expect(real, option).toBeDefined();
      expect(real!.type ?? "str", option).toBe(type ?? "str");
    }
  });

  it("the schema's and simulator's value lists are the pinned SGLang's", () => {
    const lists: Record<string, readonly string[]> = {
      reasoning_parser: REASONING_PARSERS,
      tool_call_parser: TOOL_CALL_PARSERS,
      dtype: choices.DTYPES,
      quantization: choices.QUANTIZATIONS,
      kv_cache_dtype: choices.KV_CACHE_DTYPES,
      attention_backend: choices.ATTENTION_BACKENDS,
    };
    for (const [dest, list] of Object.entries(lists)) expect(list, dest).toEqual(flags.get(dest)?.choices);
  });
});
