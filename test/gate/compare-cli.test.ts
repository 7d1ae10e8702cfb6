import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { commandArgv, compareMain } from "../../cli/compare";
import type { SweepLevel } from "../../gate/judge/levels";
import { startSimulator } from "../../simulator/index";
import { io } from "./cli-fixture";
import { cliFlags } from "../support/cli-flags";

/** `--json` (compareJson) as far as these tests read it: each service's sweep, runs without samples. */
interface CompareJson {
  services: { sweep: Pick<SweepLevel, "mode" | "level" | "requests" | "errors" | "throughput">[] }[];
}

const closers: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of closers) await c();
});

describe("gpuhost compare", () => {
  it("command templates become argv without a shell; {unit} is replaced in place", () => {
    expect(commandArgv("ssh root@h systemctl start {unit}", "sglang-eagle3.service")).toEqual([
      "ssh",
      "root@h",
      "systemctl",
      "start",
      "sglang-eagle3.service",
    ]);
    expect(commandArgv("echo $(id) {unit};", "u")).toEqual(["echo", "$(id)", "u;"]);
  });

  it("measures, prints the table and the recommendation, writes JSON, CSV and chart", async () => {
    const sim = await startSimulator({ profile: "tiny", port: 0, timeScale: 10, log: () => undefined });
    closers.push(() => sim.close());
    const dir = mkdtempSync(path.join(tmpdir(), "gpuhost-compare-cli-"));
    const o = io();
    const code = await compareMain(
      cliFlags({
        endpoint: sim.url,
        services: "autoregressive",
        activateCommand: "true {unit}",
        concurrency: "2,4",
        maxTokens: "64",
        repeats: "2",
        thinking: "off",
        cache: path.join(dir, "cache.json"),
        json: path.join(dir, "c.json"),
        csv: path.join(dir, "c.csv"),
        chart: path.join(dir, "c.svg"),
      }),
      o,
    );
    expect(o.err()).toContain("[compare] autoregressive: concurrency 4:");
    expect(code).toBe(0);
    expect(o.out()).toContain("Run autoregressive:");
    expect(o.out()).toMatch(/level\s+tok\/s \(95% CI\)/);
    const json = JSON.parse(readFileSync(path.join(dir, "c.json"), "utf8")) as CompareJson;
    expect(json.services[0].sweep.map((l) => l.level)).toEqual([2, 4]);
    expect(json.services[0].sweep[0].throughput.n).toBe(2);
    expect(readFileSync(path.join(dir, "c.csv"), "utf8").trim().split("\n")).toHaveLength(3);
    expect(readFileSync(path.join(dir, "c.svg"), "utf8")).toMatch(/^<svg[\s\S]*<\/svg>\n$/);
  }, 60_000);

  it("usage errors exit 2 with the usage", async () => {
    const o = io();
    expect(await compareMain(["--endpoint", "http://127.0.0.1:9"], o)).toBe(2);
    expect(o.err()).toContain("--activate-command is required");
    expect(await compareMain(["--endpoint", "x", "--activate-command", "true", "--services", "medusa"], io())).toBe(2);
    const both = io();
    const argv = ["--endpoint", "http://127.0.0.1:9", "--activate-command", "true", "--max-tokens", "8"];
    expect(await compareMain([...argv, "--output-tokens", "8"], both)).toBe(2);
    expect(both.err()).toContain("--output-tokens is the old spelling of --max-tokens: give one of them");
  });
});

describe("open loop", () => {
  it("--rate sends Poisson arrivals whatever the server's state; levels are request rates", async () => {
    const sim = await startSimulator({ profile: "tiny", port: 0, timeScale: 10, log: () => undefined });
    closers.push(() => sim.close());
    const dir = mkdtempSync(path.join(tmpdir(), "gpuhost-compare-open-"));
    const o = io();
    const code = await compareMain(
      [
        ...["--endpoint", sim.url, "--services", "autoregressive", "--activate-command", "true"],
        // the old spellings of --max-tokens and --requests-per-concurrency: taken, with a note each
        ...["--rate", "20,80", "--output-tokens", "64", "--repeats", "1", "--requests-per-level", "1"],
        ...["--cache", path.join(dir, "cache.json"), "--json", path.join(dir, "o.json")],
      ],
      o,
    );
    expect(code, o.out()).toBe(0);
    expect(o.err()).toContain(
      "gpuhost compare: --output-tokens is spelled --max-tokens now, as in gpuhost bench; taking it as --max-tokens\n",
    );
    expect(o.err()).toContain("--requests-per-level is spelled --requests-per-concurrency now");
    const sweep = (JSON.parse(readFileSync(path.join(dir, "o.json"), "utf8")) as CompareJson).services[0].sweep;
    expect(sweep.map((l) => [l.mode, l.level])).toEqual([
      ["open", 20],
      ["open", 80],
    ]);
    // rate x requests-per-concurrency x 10 requests per level: 200 and 800, all answered.
    expect(sweep.map((l) => [l.requests, l.errors])).toEqual([
      [200, 0],
      [800, 0],
    ]);
    expect(o.out()).toContain("Run autoregressive:");
  }, 120_000);
});
