/**
 * The story host calibrated from a published benchmark (simulator/profiles/kimi-k2.6-8x-rtx-pro-6000-published.yaml,
 * voipmonitor/rtx6kpro 2026-04): the model's own throughput at the published points, and the story's
 * comparison (cli/demo-story.ts, what `npm run demo -- --profile published` runs) recommending from it.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { rehearseStory, STORY_PROFILES } from "../../cli/demo-story";
import { PROJECT_ROOT } from "../../engine/pulumi";
import { loadProfile } from "../../simulator/profile";
import { theoreticalLevel } from "../../simulator/perf-model";

const PUBLISHED = {
  autoregressive: { 1: 88.5, 64: 1330, 128: 2026 },
  eagle3: { 1: 157, 64: 1973, 128: 2730 },
} as const;

const aggregate = (profile: string, c: number) => theoreticalLevel(loadProfile(profile), c).aggregateTokensPerSecond;

describe("the published profile of the story's host", () => {
  it("reproduces the write-up's figures within 1 % at 1, 64 and 128 streams, with and without EAGLE-3", () => {
    const names = { autoregressive: STORY_PROFILES.published, eagle3: `${STORY_PROFILES.published}-eagle3` };
    for (const kind of ["autoregressive", "eagle3"] as const)
      for (const [c, published] of Object.entries(PUBLISHED[kind]))
        expect(Math.abs(aggregate(names[kind], Number(c)) / published - 1), `${kind} at ${c}`).toBeLessThan(0.01);
    expect(loadProfile(STORY_PROFILES.published).description).toMatch(/voipmonitor\/rtx6kpro, 2026-04/);
  });

  it("EAGLE-3 leads at every concurrency up to 128 there, while the seeds' profile has it lose past ~40", () => {
    for (let c = 1; c <= 128; c++)
      expect(aggregate(`${STORY_PROFILES.published}-eagle3`, c), `C=${c}`).toBeGreaterThan(
        aggregate(STORY_PROFILES.published, c),
      );
    expect(aggregate(`${STORY_PROFILES.seeds}-eagle3`, 64)).toBeLessThan(aggregate(STORY_PROFILES.seeds, 64));
  });
});

describe("the story rehearsed on the published profile (npm run demo -- --profile published)", () => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-published-"));
  afterAll(() => fs.rmSync(out, { recursive: true, force: true }));

  it("measures the three services and recommends EAGLE-3, naming the profile's source", async () => {
    const lines: string[] = [];
    const result = await rehearseStory({
      projectRoot: PROJECT_ROOT,
      profile: "published",
      timeScale: 100,
      // Eight requests per concurrency, not the demo's one: at time scale 100 a level of 64 lasted a
      // quarter second of wall time, and under a CPU competitor a stall of the shared process (~300 ms
      // seen) took most of one: a measured EAGLE-3 fell below autoregressive and the recommendation
      // flipped (a fresh-clone run, 2026-12-04). Now a level of 64 lasts about 2 s of wall time, and a
      // stall costs a share of it; the time scale stays (the simulated model load dominates the wall).
      requestsPerConcurrency: 8,
      levels: [1, 64],
      outputTokens: 512,
      // The calibration is of serving, not of loading 548 GB: a 10 s load instead of the profile's
      // 330-660 s (3.3-6.6 s of wall time per service started, three services and a restart).
      loadSeconds: 10,
      outDir: out,
      say: (l) => lines.push(l),
      // At a time scale the simulator shares this process with the client, and a loaded machine
      // stalls both for a share of each level: the
      // certificate then says "client", rightly. This test is of the profile's calibration, so the
      // certificates are reported here, not required (the demo itself requires them).
      certification: { require: false },
    });
    expect(lines.join("\n")).toMatch(/simulator profile kimi-k2\.6-8x-rtx-pro-6000-published/);
    expect(lines.join("\n")).toMatch(/profile: .*voipmonitor\/rtx6kpro, 2026-04/);
    expect(result.comparison?.recommended).toBe("eagle3");
    // where the recommendation stands: Kimi K2.6's own config.json on the profile's 8 cards
    const text = lines.join("\n");
    expect(text).toMatch(/bandwidth roofline at batch 1: 435 tok\/s \(8 x rtx-pro-6000-server\)/);
    expect(text).toMatch(/measured [\d,]+ tok\/s = \d+ % of the roofline at 64/);
    // EAGLE-3 is already speculative: the lever is more concurrency, not "a speculative service"
    expect(text).toMatch(
      /limiter: memory bandwidth; lever: more concurrency \(the KV cache holds \d+ sequences of 512 tokens\)$/m,
    );
    // Issue 26: every figure of the demo's table carries its certificate, each level reconciled with
    // the simulator's SGLang counters whatever the machine's load.
    for (const o of result.outcomes)
      for (const l of o.sweep)
        expect(l.certificate?.checks[0], `${o.service} at ${l.level}: ${JSON.stringify(l.certificate)}`).toMatchObject({
          name: "reconciled",
          ok: true,
        });
    const rows = text.split("\n").filter((l) => /^\s+(1|64)\s+[\d,.]+/.test(l));
    expect(rows).toHaveLength(6);
    for (const row of rows) expect(row).toMatch(/ {2}(certified|not certified: .+)$/);
    expect(fs.existsSync(path.join(out, "story-compare-published.json"))).toBe(true);
    // Issue 27: the demo shows one health check's metrics, as the scheduled drift check writes them,
    // for the service left running (EAGLE-3: its acceptance beside the floor), and how to schedule it.
    // (At time scale 100 a single stream decodes too fast to time: no decode figure, by design.)
    const metric = (name: string) =>
      new RegExp(`^ {2}${name}\\{stack="story",service="http://127\\.0\\.0\\.1:\\d+"\\} (\\S+)$`, "m").exec(text)?.[1];
    expect(text).toMatch(/^One health check of the service left running, as the scheduled drift check runs it/m);
    expect(metric("gpuhost_service_answer_matches")).toBe("1");
    expect(Number(metric("gpuhost_service_acceptance_length"))).toBeGreaterThan(1.5);
    expect(metric("gpuhost_service_acceptance_floor")).toBe("1.5");
    expect(text).toMatch(/config operations\.driftCheck renders a systemd timer running gpuhost drift --textfile/);
  }, 300_000);
});
