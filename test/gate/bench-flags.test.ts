/**
 * `gpuhost bench` takes the workload controls the comparison has (--rate, --mix, --thinking,
 * --repeats, the SLO), through the one engine, against a small server written in the tests.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { benchMain } from "../../cli/bench";
import type { BenchResult } from "../../gate/run/bench";
import { io } from "./cli-fixture";
import { loadServer, type LoadServer } from "./load-servers";

let server: LoadServer | undefined;
afterAll(async () => server?.close());

const base = (url: string) => ["--endpoint", url, "--model", "m", "--max-tokens", "4", "--prompts", "1"];

describe("gpuhost bench workload controls", () => {
  it("--repeats, --mix, --thinking and the SLO flags shape the sweep; each level carries an interval over its runs", async () => {
    server = await loadServer();
    const file = path.join(mkdtempSync(path.join(tmpdir(), "gpuhost-bench-flags-")), "b.json");
    const o = io();
    const code = await benchMain(
      [
        ...base(server.url),
        ...["--concurrency", "2", "--requests-per-concurrency", "1", "--repeats", "3"],
        ...["--mix", "chat=1,code=0", "--thinking", "off", "--slo-ttft", "5", "--slo-itl", "0.5", "--json", file],
      ],
      o,
    );
    expect(code).toBe(0);
    const json = JSON.parse(readFileSync(file, "utf8")) as BenchResult;
    expect(json.plan).toMatchObject({ repeats: 3, mix: { chat: 1, code: 0 }, thinking: false });
    expect(json.plan.slo).toMatchObject({ ttftSeconds: 5, itlSeconds: 0.5 });
    expect(json.sweep[0]).toMatchObject({ mode: "closed", level: 2, requests: 6, errors: 0 });
    expect(json.sweep[0].throughput.n).toBe(3);
    expect(json.sweep[0].runs).toHaveLength(3);
    expect(json.samples.sweep[0].runs).toHaveLength(3);
    expect(json.sweep[0].meetsSlo).toBe(true);
  }, 60_000);

  it("refuses what it cannot mean, as usage (exit 2), before any request", async () => {
    const url = "http://127.0.0.1:9";
    for (const bad of [
      ["--concurrency", "2", "--rate", "1"],
      ["--mix", "chat"],
      ["--mix", "poetry=1"],
      ["--thinking", "maybe"],
      ["--repeats", "0"],
      ["--rate", "0"],
    ]) {
      const o = io();
      expect(await benchMain([...base(url), ...bad], o), bad.join(" ")).toBe(2);
    }
  });
});
