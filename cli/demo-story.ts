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
import { unknownRoofline } from "../physics/outputs";
import { runComparison, type CompareResult } from "../gate/measurement/compare-run";
import { SloSchema } from "../gate/measurement/goodput";
import { WorkloadShapeSchema } from "../gate/measurement/workload";
import { freeLocalPort } from "../ports";
import { SwitchableSimHost } from "../simulator/switchable";

const SIMULATED_ROOFLINE = unknownRoofline({ connection: { kind: "simulated" }, gpus: {} });

export const STORY_PROFILE = "kimi-k2.6-8x-rtx-pro-6000";

export interface StoryOptions {
  projectRoot: string;
  timeScale: number;
  levels: number[];
  outputTokens: number;
  outDir: string;
  say: (line: string) => void;
}

export async function rehearseStory(o: StoryOptions): Promise<CompareResult> {
  const doc = parse(fs.readFileSync(path.join(o.projectRoot, "stacks", "Pulumi.story.yaml"), "utf8")) as {
    config: Record<string, unknown>;
  };
  const services = ServicesSchema.parse(doc.config["gpuhost:services"]);
  const port = await freeLocalPort();
  const argv = (kind: ServiceKind) =>
    sglangArgv(serverArgsFor(kind, { ...services, port }, { apiKey: false })).map(String);
  const host = new SwitchableSimHost({ profile: STORY_PROFILE, timeScale: o.timeScale });
  const workload = (doc.config["gpuhost:workload"] ?? {}) as Record<string, number>;
  o.say(
    `The story's host: ${services.modelPath} at --tp ${services.tp} on 8x RTX PRO 6000 (simulator profile ${STORY_PROFILE}), time scale ${o.timeScale}.`,
  );
  for (const kind of ["autoregressive", "eagle3", "dflash"] as const)
    o.say(`  sglang-${kind}.service: python3 -m sglang.launch_server ${argv(kind).join(" ")}`);
  try {
    const result = await runComparison(
      {
        endpoint: { url: `http://127.0.0.1:${port}`, model: services.servedModelName },
        services: ["autoregressive", "eagle3", "dflash"],
        drafts: {
          eagle3: { algorithm: "EAGLE3", draftModelPath: services.eagle3!.draftModelPath },
          dflash: { algorithm: "DFLASH", draftModelPath: services.dflash!.draftModelPath },
        },
        acceptanceFloor: 1.5,
        // Training-data generation: chat and code prompts, thinking off, ~2,000-token completions.
        shape: WorkloadShapeSchema.parse({
          mix: { chat: 1, code: 1 },
          outputTokens: { distribution: "fixed", tokens: o.outputTokens },
          thinking: false,
        }),
        slo: SloSchema.parse({}),
        levels: o.levels,
        requestsPerLevel: 1,
        repeats: 1,
        requestTimeoutSeconds: 7200,
        timeScale: o.timeScale,
        // Loading 548 GB takes 330-660 s of host time; the gate's deadline is in wall time.
        verifyPolicy: { deadlineSeconds: 900 / o.timeScale + 60, thinkingToggle: true, probeTimeoutSeconds: 60 },
        job: {
          purpose: "batch",
          completions: workload.completions ?? 900_000,
          outputTokensPerCompletion: workload.outputTokensPerCompletion ?? 2000,
          deadlineDays: workload.deadlineDays ?? 7,
          gpusPerHost: 8,
        },
        auto: true,
        restore: "autoregressive",
      },
      {
        activate: (s) => host.activate(argv(s)),
        identity: async (s) => argv(s).join(" "),
        onProgress: (line) => o.say(`  ${line}`),
      },
    );
    fs.mkdirSync(o.outDir, { recursive: true });
    const base = path.join(o.outDir, "story-compare");
    fs.writeFileSync(`${base}.json`, JSON.stringify(compareJson(result), null, 1) + "\n");
    fs.writeFileSync(`${base}.csv`, compareCsv(result));
    fs.writeFileSync(`${base}.svg`, compareChart(result, services.servedModelName ?? services.modelPath));
    o.say("");
    o.say(compareText(result));
    // The story's host would have a roofline (docs/physics.md: ~435 tok/s at batch 1 for Kimi K2.6 on
    // 8 x RTX PRO 6000); the simulated one has no config.json to read it from, so it says so.
    o.say(`Roofline: ${SIMULATED_ROOFLINE.known ? "" : SIMULATED_ROOFLINE.reason}.`);
    o.say(`Written: ${base}.json, ${base}.csv, ${base}.svg`);
    return result;
  } finally {
    await host.stop();
  }
}
