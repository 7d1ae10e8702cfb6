/**
 * Detection latency: from the moment the simulator can generate (its "Load weight end" log line;
 * earlier than "fired up", so this errs against the gate) to verify() returning ready.
 * Target: median <= 0.5 s. Scenarios: late-port (connection refused through the load) and
 * models-before-ready (/v1/models answers, generations hang until loaded).
 *
 *   npx tsx bench/gate-detection-latency.ts [--runs 20] [--load-seconds 1.5]
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { parseArgs } from "node:util";
import { parse, stringify } from "yaml";
import { verify } from "../gate/index";
import { percentile } from "../gate/judge/stats";
import { startSimulator } from "../simulator/index";

async function once(profile: string, fault: string, thinkingToggle: boolean): Promise<number> {
  let loadedAt: number | null = null;
  const sim = await startSimulator({
    profile,
    faults: [fault],
    port: 0,
    log: (line) => {
      if (loadedAt === null && line.includes("Load weight end")) loadedAt = performance.now();
    },
    onExit: () => undefined,
  });
  try {
    const result = await verify({ url: sim.url, model: "tiny" }, { deadlineSeconds: 60, thinkingToggle });
    const readyAt = performance.now();
    if (!result.ready || loadedAt === null) throw new Error(`not ready: ${result.diagnosis}`);
    return (readyAt - loadedAt) / 1000;
  } finally {
    await sim.close();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { runs: { type: "string", default: "20" }, "load-seconds": { type: "string", default: "1.5" } },
  });
  const load = Number(values["load-seconds"]);
  const tiny = path.join(__dirname, "../simulator/profiles/tiny.yaml");
  const base = parse(readFileSync(tiny, "utf8")) as Record<string, unknown>;
  const profile = path.join(mkdtempSync(path.join(tmpdir(), "gpuhost-detect-")), "tiny-slow-load.yaml");
  writeFileSync(profile, stringify({ ...base, load: { minSeconds: load, maxSeconds: load, warmupSeconds: 0.02 } }));
  const rows = [];
  for (const fault of ["late-port", "models-before-ready"]) {
    for (const thinkingToggle of [true, false]) {
      const latencies: number[] = [];
      for (let i = 0; i < Number(values.runs); i++) latencies.push(await once(profile, fault, thinkingToggle));
      const sorted = Float64Array.from(latencies).sort();
      rows.push({
        fault,
        thinkingToggle,
        runs: latencies.length,
        medianSeconds: percentile(sorted, 50),
        p90Seconds: percentile(sorted, 90),
        maxSeconds: sorted[sorted.length - 1],
      });
    }
  }
  console.log(JSON.stringify(rows, null, 2));
  for (const r of rows)
    console.log(
      `${r.fault.padEnd(20)} thinkingToggle=${String(r.thinkingToggle).padEnd(5)} median ${r.medianSeconds!.toFixed(3)} s  p90 ${r.p90Seconds!.toFixed(3)} s  max ${r.maxSeconds.toFixed(3)} s  (target median <= 0.5 s)`,
    );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
