/**
 * The story (docs/story.md), rehearsed: Kimi K2.6 on 8x RTX PRO 6000 Blackwell, its autoregressive, EAGLE-3 and
 * DFlash services (the units' real command lines from stacks/Pulumi.story.yaml, through the
 * stand-in sglang on one simulated host, one service at a time), the same realistic workload on
 * each, then which to run and the plan for the story's job: 900,000 completions x 2,000 tokens.
 *
 * The host runs `timeScale` times faster than the wall clock; every figure printed is in the host's
 * own time (simulator/README.md, "Time scale"), and the output says so.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { parse } from "yaml";
import { sglangArgv, serverArgsFor } from "../components/services/launch-args";
import { ServicesSchema, type ServiceKind } from "../components/services/schema";
import { compareChart } from "../gate/reports/chart";
import { compareCsv } from "../gate/reports/csv";
import { compareJson, compareText } from "../gate/reports/compare-report";
import { findGpu } from "../physics/gpus";
import { modelFacts } from "../physics/model-config";
import { DEFAULT_MEM_FRACTION_STATIC, roofline, rooflineLines } from "../physics/roofline";
import { runComparison, type CompareOptions, type CompareResult } from "../gate/plan/compare-run";
import { BenchPlanSchema, VerifyPolicySchema, type BenchPlanInput, type VerifyPolicyInput } from "../gate/base/schema";
import { verify } from "../gate/readiness/verify";
import { checkHealth, healthDrift, recordHealth } from "../gate/health/health";
import type { Endpoint } from "../gate/transport/http";
import { driftExposition } from "../components/drift/metrics";
import { outcomeOf, type DriftReport } from "../components/drift/report";
import { freeLocalPort } from "../ports";
import { loadProfile } from "../simulator/profile";
import { SwitchableSimHost } from "../simulator/switchable";

export const STORY_PROFILE = "kimi-k2.6-8x-rtx-pro-6000";
/** Below this many tokens per verify step the story's speculation is called broken (the comparison's floor). */
const STORY_ACCEPTANCE_FLOOR = 1.5;

/**
 * The story host's two simulator profiles: the seeds' afternoon (the story's own observations) and
 * one calibrated from a published benchmark of the same model on the same cards (its file names the
 * source, date and conditions).
 */
export const STORY_PROFILES = {
  seeds: STORY_PROFILE,
  published: "kimi-k2.6-8x-rtx-pro-6000-published",
} as const;
export type StoryProfile = keyof typeof STORY_PROFILES;

/** The story model's own config.json (Kimi K2.6, from its Hugging Face repository), shipped for the roofline. */
export const STORY_MODEL_CONFIG = path.join("physics", "models", "kimi-k2.6.config.json");

/**
 * Where the recommended service's sustained figure stands against the story host's physics
 * (docs/physics.md): the model's config.json on the profile's GPUs, at the concurrency it was
 * sustained at. The simulated host has no config.json of its own; the story's model is known.
 */
function storyRoofline(
  o: StoryOptions,
  profileName: string,
  memFractionStatic: number,
  plan: { service: string; sustainedOutputTokensPerSecond: number; atLevel: number | null } | undefined,
): string[] {
  const p = loadProfile(profileName);
  const gpu = findGpu(p.hardware.gpu);
  if (!gpu || p.model.path !== "moonshotai/Kimi-K2.6")
    return [
      `not known: ${gpu ? `the profile serves ${p.model.path}, not Kimi K2.6` : `${p.hardware.gpu} is not in the GPU catalogue`}`,
    ];
  const model = modelFacts(JSON.parse(fs.readFileSync(path.join(o.projectRoot, STORY_MODEL_CONFIG), "utf8")));
  const measured =
    plan && plan.atLevel !== null
      ? {
          concurrency: plan.atLevel,
          tokensPerSecond: plan.sustainedOutputTokensPerSecond,
          speculative: plan.service !== "autoregressive",
        }
      : undefined;
  const host = { gpu, gpus: p.hardware.count, memFractionStatic, contextTokens: o.outputTokens };
  return rooflineLines(roofline(model, host, measured), o.outputTokens);
}

/**
 * Issue 27 rehearsed: the service the comparison left running, checked once as the scheduled drift
 * check checks it (gate/health/health.ts: the greedy reference answer, the decode probe and, when
 * speculative, the acceptance probe) against a baseline recorded a moment before, as a verification
 * records it; and the Prometheus metrics that check writes (components/drift/metrics.ts, the
 * textfile's exposition). No engine here: the report holds that one service.
 */
async function storyHealthCheck(
  endpoint: Endpoint & { model: string },
  speculative: { acceptanceFloor: number } | undefined,
  verifyPolicy: VerifyPolicyInput,
  timeScale: number,
): Promise<string[]> {
  const policy = VerifyPolicySchema.parse(verifyPolicy);
  // The service the comparison left active may have been started again a moment ago: the gate first,
  // as on a host, where only a verified service has a baseline.
  const ready = await verify(endpoint, policy);
  if (!ready.ready)
    return [`No health check: the service left running is not ready (${ready.diagnosis ?? ready.phase}).`];
  const started = Date.now();
  const opts = { timeScale, speculative };
  const baseline = await recordHealth(endpoint, policy, opts);
  if (!baseline) return [];
  const check = await checkHealth(endpoint, baseline, { ...opts, policy, health: policy.health });
  const drift = healthDrift(check);
  const errors = check.notChecked === null ? [] : [`health not checked: ${check.notChecked}`];
  const status = errors.length > 0 ? "error" : drift.length > 0 ? "drift" : "clean";
  const report: DriftReport = {
    stack: "story",
    hosts: [],
    services: [{ endpoint: endpoint.url, resources: ["story"], status, drift, errors, health: check }],
    otherChanges: [],
    errors: [],
  };
  const outcome = outcomeOf(report);
  const text = await driftExposition(report, outcome, { endedAtMs: Date.now(), durationMs: Date.now() - started });
  const samples = text
    .split("\n")
    .filter((l) => /^gpuhost_(drift|drift_items|drift_check_success|service_\w+)\{/.test(l));
  return [
    `One health check of the service left running, as the scheduled drift check runs it (outcome ${outcome}), in its Prometheus metrics:`,
    ...samples.map((l) => `  ${l}`),
    "Scheduled on a stack: config operations.driftCheck renders a systemd timer running gpuhost drift --textfile hourly into node_exporter's textfile folder (components/drift-check); ops/prometheus has the alert rules.",
  ];
}

export interface StoryOptions {
  projectRoot: string;
  /** Which of STORY_PROFILES the host runs (default seeds). */
  profile?: StoryProfile;
  timeScale: number;
  levels: number[];
  outputTokens: number;
  outDir: string;
  say: (line: string) => void;
  /** The certificate's policy (default: the schema's, uncertified levels are no figure). */
  certification?: BenchPlanInput["certification"];
  /** Requests per level per concurrency (default 1): more makes a level last longer on the wall clock. */
  requestsPerConcurrency?: number;
  /** Every model load takes this many host seconds (the demo: the profile's 330-660 s, the story's wait). */
  loadSeconds?: number;
}

export async function rehearseStory(o: StoryOptions): Promise<CompareResult> {
  const story = await storyHost(o);
  const { host, argv } = story;
  try {
    const result = await runComparison(storyComparison(o, story), {
      activate: (s) => host.activate(argv(s)),
      identity: async (s) => argv(s).join(" "),
      onProgress: (line) => o.say(`  ${line}`),
    });
    await reportStory(o, story, result);
    return result;
  } finally {
    await host.stop();
  }
}

type StoryHost = Awaited<ReturnType<typeof storyHost>>;

/** The story stack's services on a simulated host of the profile, each unit's command line said. */
async function storyHost(o: StoryOptions) {
  const doc = parse(fs.readFileSync(path.join(o.projectRoot, "stacks", "Pulumi.story.yaml"), "utf8")) as {
    config: Record<string, unknown>;
  };
  const services = ServicesSchema.parse(doc.config["gpuhost:services"]);
  const port = await freeLocalPort();
  const argv = (kind: ServiceKind) =>
    sglangArgv(serverArgsFor(kind, { ...services, port }, { apiKey: false })).map(String);
  const which = o.profile ?? "seeds";
  const profile = STORY_PROFILES[which];
  const host = new SwitchableSimHost({ profile, timeScale: o.timeScale, loadSeconds: o.loadSeconds });
  const endpoint = { url: `http://127.0.0.1:${port}`, model: services.servedModelName ?? services.modelPath };
  // Loading 548 GB takes 330-660 s of host time; the gate's deadline is in wall time.
  const verifyPolicy = { deadlineSeconds: 900 / o.timeScale + 60, thinkingToggle: true, probeTimeoutSeconds: 60 };
  const workload = (doc.config["gpuhost:workload"] ?? {}) as Record<string, number>;
  o.say(
    `The story's host: ${services.modelPath} at --tp ${services.tp} on 8x RTX PRO 6000 (simulator profile ${profile}), time scale ${o.timeScale}.`,
  );
  o.say(`  profile: ${loadProfile(profile).description}`);
  for (const kind of ["autoregressive", "eagle3", "dflash"] as const)
    o.say(`  sglang-${kind}.service: python3 -m sglang.launch_server ${argv(kind).join(" ")}`);
  return { services, argv, which, profile, host, endpoint, verifyPolicy, workload };
}

/** The story's comparison: its three services, training-data generation's plan, the story's job. */
function storyComparison(o: StoryOptions, story: StoryHost): CompareOptions {
  const { services, workload } = story;
  return {
    endpoint: story.endpoint,
    services: ["autoregressive", "eagle3", "dflash"],
    drafts: {
      eagle3: { algorithm: "EAGLE3", draftModelPath: services.eagle3!.draftModelPath },
      dflash: { algorithm: "DFLASH", draftModelPath: services.dflash!.draftModelPath },
    },
    acceptanceFloor: STORY_ACCEPTANCE_FLOOR,
    // Training-data generation: chat and code prompts, thinking off, ~2,000-token completions.
    plan: BenchPlanSchema.parse({
      mix: { chat: 1, code: 1 },
      sweepMaxTokens: o.outputTokens,
      thinking: false,
      concurrency: o.levels,
      requestsPerConcurrency: o.requestsPerConcurrency ?? 1,
      repeats: 1,
      requestTimeoutSeconds: 7200,
      certification: o.certification,
    }),
    timeScale: o.timeScale,
    verifyPolicy: story.verifyPolicy,
    job: {
      purpose: "batch",
      completions: workload.completions ?? 900_000,
      outputTokensPerCompletion: workload.outputTokensPerCompletion ?? 2000,
      deadlineDays: workload.deadlineDays ?? 7,
      gpusPerHost: 8,
    },
    auto: true,
    restore: "autoregressive",
  };
}

/** The comparison's files and text, where the chosen service stands, and its health on the host it was left on. */
async function reportStory(o: StoryOptions, story: StoryHost, result: CompareResult): Promise<void> {
  const { services, which, profile } = story;
  fs.mkdirSync(o.outDir, { recursive: true });
  const base = path.join(o.outDir, which === "seeds" ? "story-compare" : `story-compare-${which}`);
  fs.writeFileSync(`${base}.json`, JSON.stringify(compareJson(result), null, 1) + "\n");
  fs.writeFileSync(`${base}.csv`, compareCsv(result));
  fs.writeFileSync(`${base}.svg`, compareChart(result, services.servedModelName ?? services.modelPath));
  o.say("");
  o.say(compareText(result));
  const chosen = result.comparison?.plans.find((p) => p.service === result.comparison?.recommended);
  o.say(
    `Where ${chosen ? `${chosen.service}'s sustained figure` : "the host"} stands (${STORY_MODEL_CONFIG} on the profile's GPUs, docs/physics.md):`,
  );
  // The plan CLI's default where the stack leaves SGLang to choose (the story sets 0.85).
  for (const line of storyRoofline(o, profile, services.memFractionStatic ?? DEFAULT_MEM_FRACTION_STATIC, chosen))
    o.say(`  ${line}`);
  // The service the comparison left active (the recommended one, or the one it restored).
  const speculative = result.activeAfter === "autoregressive" ? undefined : { acceptanceFloor: STORY_ACCEPTANCE_FLOOR };
  for (const line of await storyHealthCheck(story.endpoint, speculative, story.verifyPolicy, o.timeScale)) o.say(line);
  o.say(`Written: ${base}.json, ${base}.csv, ${base}.svg`);
}
