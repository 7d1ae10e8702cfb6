// gpuhost drift --textfile DIR (issue 27.2): the check as Prometheus metrics for node_exporter's
// textfile collector, written through prom-client's registry. The exposition is checked as exact
// text (the format node_exporter parses: escaped label values, one sample a line); the file's write
// against the real filesystem (a temporary file in DIR renamed over the old one); driftMain with a
// stand-in engine (mocked: the tests say so) for the file a failed check writes.
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { testTempDir } from "../support/temp-dir";
import { driftMain } from "../../cli/drift";
import { driftExposition, textfileName, writeTextfile } from "../../components/drift/metrics";
import type { DriftReport } from "../../components/drift/report";

const tempDir = () => testTempDir("textfile");

const CURAND = "files./usr/local/cuda-13.0/include/curand.h";
const drifted: DriftReport = {
  stack: "prod",
  hosts: [
    {
      // a label with every character the format escapes: a quote, a backslash, a newline
      host: 'local /srv/a "b"\\c\nd',
      resources: ["t"],
      status: "drift",
      drift: [
        { field: CURAND, expected: "sha256:1", found: null, repair: "pulumi up" },
        { field: "packages.libcurand-dev-13-0", expected: "10.4.0.35-1", found: null, repair: "pulumi up" },
      ],
      errors: [],
    },
    { host: "ssh root@gpu2:22", resources: ["u"], status: "clean", drift: [], errors: [] },
  ],
  services: [],
  fleet: [],
  otherChanges: [],
  errors: [],
};
const timing = { endedAtMs: 1796342400250, durationMs: 12345 };
const HELP = {
  drift:
    "# HELP gpuhost_drift 1 for each item that drifted (item: what the check compared, e.g. files.<path> or packages.<name>; group: a mixed fleet's group the item belongs to)\n# TYPE gpuhost_drift gauge\n",
  items:
    "# HELP gpuhost_drift_items How many items drifted on each host, service or router the check reached\n# TYPE gpuhost_drift_items gauge\n",
  success:
    "# HELP gpuhost_drift_check_success 1 when the check gave a verdict (clean or drift), 0 when it failed\n# TYPE gpuhost_drift_check_success gauge\n",
  reason:
    "# HELP gpuhost_drift_check_failure_reason 1 for the reason the check failed (gpuhost drift's outcome: see its exit statuses)\n# TYPE gpuhost_drift_check_failure_reason gauge\n",
  timestamp:
    "# HELP gpuhost_drift_check_timestamp_seconds When the check ended, in seconds since the epoch\n# TYPE gpuhost_drift_check_timestamp_seconds gauge\n",
  duration:
    "# HELP gpuhost_drift_check_duration_seconds How long the check took\n# TYPE gpuhost_drift_check_duration_seconds gauge\n",
};

describe("the exposition of one check", () => {
  it("a drifted host: one gpuhost_drift sample per item, label values escaped; items per host; success 1", async () => {
    const label = 'host="local /srv/a \\"b\\"\\\\c\\nd"';
    expect(await driftExposition(drifted, "drift", timing)).toBe(
      [
        HELP.drift,
        `gpuhost_drift{stack="prod",${label},item="${CURAND}"} 1\n`,
        `gpuhost_drift{stack="prod",${label},item="packages.libcurand-dev-13-0"} 1\n\n`,
        HELP.items,
        `gpuhost_drift_items{stack="prod",${label}} 2\n`,
        'gpuhost_drift_items{stack="prod",host="ssh root@gpu2:22"} 0\n\n',
        HELP.success,
        'gpuhost_drift_check_success{stack="prod"} 1\n\n',
        HELP.reason,
        "\n",
        HELP.timestamp,
        'gpuhost_drift_check_timestamp_seconds{stack="prod"} 1796342400.25\n\n',
        HELP.duration,
        'gpuhost_drift_check_duration_seconds{stack="prod"} 12.345\n',
      ].join(""),
    );
  });

  it("a mixed fleet's worker: its drift labelled by router and by group", async () => {
    const fleet: DriftReport = {
      ...drifted,
      hosts: [],
      fleet: [
        {
          router: "http://10.0.0.5:30000",
          resources: ["f"],
          status: "drift",
          drift: [
            { field: "groups.batch.workers.gpu-3", expected: "registered", found: "missing", repair: "pulumi up" },
            { field: "router.version", expected: "smg 1.13.0", found: "smg 1.12.0", repair: "pulumi up" },
          ],
          errors: [],
        },
      ],
    };
    const samples = (await driftExposition(fleet, "drift", timing))
      .split("\n")
      .filter((l) => l.startsWith("gpuhost_drift{"));
    expect(samples).toEqual([
      'gpuhost_drift{stack="prod",host="http://10.0.0.5:30000",item="groups.batch.workers.gpu-3",group="batch"} 1',
      'gpuhost_drift{stack="prod",host="http://10.0.0.5:30000",item="router.version"} 1',
    ]);
  });

  it("a failed check: success 0 and its reason, no drift samples", async () => {
    const failed: DriftReport = { ...drifted, hosts: [], failure: "no-stack" };
    const text = await driftExposition(failed, "no-stack", timing);
    expect(text.split("\n").filter((l) => l !== "" && !l.startsWith("#"))).toEqual([
      'gpuhost_drift_check_success{stack="prod"} 0',
      'gpuhost_drift_check_failure_reason{stack="prod",reason="no-stack"} 1',
      'gpuhost_drift_check_timestamp_seconds{stack="prod"} 1796342400.25',
      'gpuhost_drift_check_duration_seconds{stack="prod"} 12.345',
    ]);
  });
});

describe("the file in DIR", () => {
  it("is written to a temporary file in DIR and renamed over the old one, readable by node_exporter's user", async () => {
    const dir = tempDir();
    const target = path.join(dir, "gpuhost-drift-prod.prom");
    fs.writeFileSync(target, "old\n");
    // A second name for the old file: a write in place would change what it holds, a rename does not.
    fs.linkSync(target, path.join(dir, "old-copy"));
    const seen: string[] = [];
    const watcher = fs.watch(dir, (_, name) => name && seen.push(name));
    const text = await driftExposition(drifted, "drift", timing);
    expect(writeTextfile(dir, "prod", text)).toBe(target);
    await new Promise((r) => setTimeout(r, 200)); // the watcher's events arrive on the event loop
    watcher.close();
    expect(fs.readFileSync(target, "utf8")).toBe(text);
    expect(fs.readFileSync(path.join(dir, "old-copy"), "utf8")).toBe("old\n");
    expect(fs.statSync(target).mode & 0o777).toBe(0o644);
    // the temporary file lived in DIR under a name the collector skips, and is gone
    const temps = [...new Set(seen)].filter((n) => n !== "gpuhost-drift-prod.prom" && n !== "old-copy");
    expect(temps).toEqual([expect.stringMatching(/^\.gpuhost-drift-prod\.prom\..*\.tmp$/)]);
    expect(fs.readdirSync(dir).sort()).toEqual(["gpuhost-drift-prod.prom", "old-copy"]);
  });

  it("names an org/project/stack's file without its slashes", () => {
    expect(textfileName("acme/gpuhost/prod")).toBe("gpuhost-drift-acme_gpuhost_prod.prom");
  });

  it("gpuhost drift --textfile: a failed check (no such stack) still writes it, success 0 (stand-in engine)", async () => {
    const dir = tempDir();
    const code = await driftMain(["--stack", "nosuch", "--textfile", dir], {
      out: () => undefined,
      err: () => undefined,
      runPulumi: () => Promise.resolve({ code: 6, stdout: "", stderr: "error: no stack named 'nosuch' found\n" }),
    });
    expect(code).toBe(12);
    const text = fs.readFileSync(path.join(dir, "gpuhost-drift-nosuch.prom"), "utf8");
    expect(text).toContain('gpuhost_drift_check_success{stack="nosuch"} 0\n');
    expect(text).toContain('gpuhost_drift_check_failure_reason{stack="nosuch",reason="no-stack"} 1\n');
    expect(text).toMatch(/^gpuhost_drift_check_timestamp_seconds\{stack="nosuch"\} \d+(\.\d+)?$/m);
  });

  it("--textfile naming no folder is refused before the engine runs (exit 2)", async () => {
    let ran = false;
    let err = "";
    const code = await driftMain(["--stack", "prod", "--textfile", path.join(tempDir(), "absent")], {
      out: () => undefined,
      err: (t) => void (err += t),
      runPulumi: () => {
        ran = true;
        return Promise.resolve({ code: 0, stdout: "", stderr: "" });
      },
    });
    expect(code).toBe(2);
    expect(ran).toBe(false);
    expect(err).toMatch(/--textfile .*absent: no such folder/);
  });
});
