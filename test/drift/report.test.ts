// The drift report: parsing the engine's streamed JSON events for
// `pulumi refresh --preview-only --expect-no-changes --json` (shapes as pulumi v3.276.0 prints them
// with PULUMI_ENABLE_STREAMING_JSON_PREVIEW=true), the text for each kind of drift, exit codes.
// driftMain is run with a stand-in for the engine (mocked: the tests name it) that prints such events.
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { driftMain, refreshArgs } from "../../cli/drift";
import {
  exitCodeOf,
  FLEET_VERIFICATION_TYPE,
  formatReport,
  parseRefreshOutput,
  TOOLKIT_STATE_TYPE,
  VERIFIED_GENERATION_TYPE,
} from "../../components/drift/report";
import type { Drift } from "../../components/drift/schema";

const STACK_URN = "urn:pulumi:sim::gpuhost::pulumi:pulumi:Stack::gpuhost-sim";
const urnOf = (name: string): string =>
  `urn:pulumi:sim::gpuhost::gpuhost:index:GpuServingHost$${TOOLKIT_STATE_TYPE}::${name}`;

let seq = 0;
const line = (ev: object): string => JSON.stringify({ sequence: seq++, timestamp: 1795961179, ...ev });

function toolkitEvents(name: string, hostLabel: string, drift: Drift[]): string[] {
  const urn = urnOf(name);
  const state = (d: Drift[]) => ({
    type: TOOLKIT_STATE_TYPE,
    urn,
    custom: true,
    id: "toolkit-state-0123456789abcdef",
    outputs: { hostLabel, drift: d, connection: "[secret]" },
  });
  return [
    line({
      resourcePreEvent: {
        metadata: { op: "refresh", urn, type: TOOLKIT_STATE_TYPE, old: state([]), new: state([]), detailedDiff: null },
        planning: true,
      },
    }),
    line({
      resOutputsEvent: {
        metadata: {
          op: drift.length > 0 ? "update" : "same",
          urn,
          type: TOOLKIT_STATE_TYPE,
          old: state([]),
          new: state(drift),
          detailedDiff: null,
        },
        planning: true,
      },
    }),
  ];
}

function stream(...parts: (string | string[])[]): string {
  const changed = parts.flat().filter((l) => l.includes('"op":"update"')).length;
  return [
    line({ preludeEvent: { config: {} } }),
    line({ resOutputsEvent: { metadata: { op: "same", urn: STACK_URN, type: "pulumi:pulumi:Stack" } } }),
    ...parts.flat(),
    line({
      summaryEvent: {
        maybeCorrupt: false,
        durationSeconds: 1,
        resourceChanges: { same: 1, ...(changed ? { update: changed } : {}) },
        isPreview: true,
        result: "succeeded",
      },
    }),
    line({ cancelEvent: {} }),
  ].join("\n");
}

const CURAND: Drift[] = [
  {
    field: "packages.libcurand-dev-13-0",
    expected: "10.4.0.35-1",
    found: null,
    repair: "apt-get install --reinstall libcurand-dev-13-0",
  },
  {
    field: "files./usr/local/cuda-13.0/include/curand.h",
    expected: "present",
    found: null,
    repair: "apt-get install --reinstall libcurand-dev-13-0",
  },
];
const LINK: Drift[] = [
  {
    field: "cudaLink",
    expected: "/usr/local/cuda-13.0",
    found: "/usr/local/cuda-12.8",
    repair: "update-alternatives --set cuda /usr/local/cuda-13.0",
  },
];
const UNIT: Drift[] = [
  {
    field: "units./etc/systemd/system/sglang.service.sha256",
    expected: "a".repeat(64),
    found: "b".repeat(64),
    repair:
      "the unit file was edited on the host: restore the rendered unit (pulumi up), then systemctl daemon-reload && systemctl restart sglang.service",
  },
];
const HEADER: Drift[] = [
  {
    field: "files./usr/local/cuda-13.0/include/cusparse.h",
    expected: "c".repeat(64),
    found: "d".repeat(64),
    repair: "apt-get install --reinstall libcusparse-dev-13-0 (the file's content changed)",
  },
];
const JIT: Drift[] = [
  {
    field: "jit.key",
    expected: "cuda13.0-a",
    found: "cuda12.8-a",
    repair:
      "remove stale JIT caches: rm -rf /var/cache/gpuhost/flashinfer/cuda12.8-a; re-create /var/cache/gpuhost/flashinfer/cuda13.0-a (pulumi up)",
  },
];

describe("drift report", () => {
  it("a clean stack: exit 0 and a one-line verdict per host", () => {
    const report = parseRefreshOutput(stream(toolkitEvents("gpu1-toolkit", "ssh root@gpu1:22", [])), "prod");
    expect(exitCodeOf(report)).toBe(0);
    expect(report.hosts).toEqual([
      { host: "ssh root@gpu1:22", resources: ["gpu1-toolkit"], status: "clean", drift: [], errors: [] },
    ]);
    expect(formatReport(report)).toBe(
      "gpuhost drift (stack prod): clean: 1 host(s) probed, 0 drifted, 0 could not be probed\n\nhost ssh root@gpu1:22 [gpu1-toolkit]: clean\n",
    );
  });

  it("libcurand-dev-13-0 removed: what, expected, found and repair", () => {
    const report = parseRefreshOutput(stream(toolkitEvents("gpu1-toolkit", "ssh root@gpu1:22", CURAND)));
    expect(exitCodeOf(report)).toBe(1);
    const text = formatReport(report);
    expect(text).toContain("host ssh root@gpu1:22 [gpu1-toolkit]: DRIFT in 2 field(s)");
    expect(text).toContain(
      [
        "  packages.libcurand-dev-13-0",
        "    expected: 10.4.0.35-1",
        "    found:    (absent)",
        "    repair:   apt-get install --reinstall libcurand-dev-13-0",
      ].join("\n"),
    );
    expect(text).toContain(
      "  files./usr/local/cuda-13.0/include/curand.h\n    expected: present\n    found:    (absent)",
    );
  });

  it("/usr/local/cuda at 12.8", () => {
    const text = formatReport(parseRefreshOutput(stream(toolkitEvents("t", "local", LINK))));
    expect(text).toContain(
      "  cudaLink\n    expected: /usr/local/cuda-13.0\n    found:    /usr/local/cuda-12.8\n    repair:   update-alternatives --set cuda /usr/local/cuda-13.0\n",
    );
  });

  it("a unit file edited", () => {
    const text = formatReport(parseRefreshOutput(stream(toolkitEvents("t", "local", UNIT))));
    expect(text).toContain(
      `  units./etc/systemd/system/sglang.service.sha256\n    expected: ${"a".repeat(64)}\n    found:    ${"b".repeat(64)}\n`,
    );
    expect(text).toContain("systemctl daemon-reload && systemctl restart sglang.service");
  });

  it("a header replaced", () => {
    const text = formatReport(parseRefreshOutput(stream(toolkitEvents("t", "local", HEADER))));
    expect(text).toContain(
      `  files./usr/local/cuda-13.0/include/cusparse.h\n    expected: ${"c".repeat(64)}\n    found:    ${"d".repeat(64)}\n    repair:   apt-get install --reinstall libcusparse-dev-13-0 (the file's content changed)\n`,
    );
  });

  it("the JIT cache key changed", () => {
    const text = formatReport(parseRefreshOutput(stream(toolkitEvents("t", "local", JIT))));
    expect(text).toContain(
      "  jit.key\n    expected: cuda13.0-a\n    found:    cuda12.8-a\n    repair:   remove stale JIT caches: rm -rf /var/cache/gpuhost/flashinfer/cuda12.8-a;",
    );
  });

  it("several hosts: grouped by host, sorted, only the drifted one listed with fields", () => {
    const report = parseRefreshOutput(
      stream(
        toolkitEvents("gpu2-toolkit", "ssh root@gpu2:22", LINK),
        toolkitEvents("gpu1-toolkit", "ssh root@gpu1:22", []),
      ),
    );
    expect(report.hosts.map((h) => [h.host, h.status])).toEqual([
      ["ssh root@gpu1:22", "clean"],
      ["ssh root@gpu2:22", "drift"],
    ]);
    expect(exitCodeOf(report)).toBe(1);
    expect(formatReport(report)).toMatch(
      /^gpuhost drift \(current stack\): DRIFT: 2 host\(s\) probed, 1 drifted, 0 could not be probed\n/,
    );
  });

  it("a host that cannot be probed is not checked (exit 10), named under its host", () => {
    const urn = urnOf("gpu3-toolkit");
    const out = stream(toolkitEvents("gpu1-toolkit", "ssh root@gpu1:22", []), [
      line({
        resourcePreEvent: {
          metadata: {
            op: "refresh",
            urn,
            type: TOOLKIT_STATE_TYPE,
            old: { outputs: { hostLabel: "ssh root@gpu3:22" } },
          },
        },
      }),
      line({
        diagnosticEvent: {
          urn,
          prefix: "error: ",
          message: "toolkit probe exited 255: ssh: connect to host gpu3 port 22: Connection refused\n",
          color: "never",
          severity: "error",
        },
      }),
    ]).replace('"result":"succeeded"', '"result":"failed"');
    const report = parseRefreshOutput(out);
    expect(exitCodeOf(report)).toBe(10);
    const gpu3 = report.hosts.find((h) => h.host === "ssh root@gpu3:22")!;
    expect(gpu3.status).toBe("error");
    expect(gpu3.errors[0]).toMatch(/Connection refused/);
    expect(report.errors).toEqual([]);
    expect(formatReport(report)).toContain(
      "host ssh root@gpu3:22 [gpu3-toolkit]: ERROR\n  error: toolkit probe exited 255",
    );
  });

  it("a host whose key the stored connection refused was not probed: not checked (exit 10), with the refusal", () => {
    // ToolkitState's read keeps the old record, marked hostKeyRefused, and its drift list is the old one.
    const refusal =
      "gpu2:22 presented ssh-ed25519 SHA256:new, but hostKey pins ssh-ed25519 SHA256:old: refused (someone in between, or the host's key changed: pin the new key only after checking it on the host)";
    const events = toolkitEvents("gpu2-toolkit", "ssh root@gpu2:22", []).map((l) =>
      l.includes("resOutputsEvent")
        ? l
            .replace('"op":"same"', '"op":"update"')
            .replace(/("new":\{[^}]*"outputs":\{)/, `$1"hostKeyRefused":${JSON.stringify(refusal)},`)
        : l,
    );
    expect(events.join("\n")).toContain('"hostKeyRefused"');
    const report = parseRefreshOutput(stream(toolkitEvents("gpu1-toolkit", "ssh root@gpu1:22", []), events));
    expect(exitCodeOf(report)).toBe(10);
    const gpu2 = report.hosts.find((h) => h.host === "ssh root@gpu2:22")!;
    expect(gpu2).toMatchObject({ status: "error", errors: [`not probed: ${refusal}`], drift: [] });
    expect(report.hosts.find((h) => h.host === "ssh root@gpu1:22")?.status).toBe("clean");
  });

  it("unparsable or truncated engine output is an error, never clean", () => {
    expect(exitCodeOf(parseRefreshOutput(""))).toBe(11);
    expect(exitCodeOf(parseRefreshOutput("error: could not load plugin\n"))).toBe(11);
    const truncated = stream(toolkitEvents("t", "local", []))
      .split("\n")
      .slice(0, 3)
      .join("\n");
    const report = parseRefreshOutput(truncated);
    expect(report.errors).toEqual([
      "pulumi's output ended before the refresh summary (the engine failed or was killed)",
    ]);
    expect(exitCodeOf(report)).toBe(11);
  });

  it("the expect-no-changes diagnostic is the drift signal, not an error", () => {
    const out = stream(toolkitEvents("t", "local", LINK), [
      line({
        diagnosticEvent: {
          message: "no changes were expected for refresh but changes were proposed",
          severity: "error",
        },
      }),
    ]);
    expect(exitCodeOf(parseRefreshOutput(out))).toBe(1);
  });

  it("other resources a refresh would change count as drift", () => {
    const out = stream([
      line({
        resOutputsEvent: {
          metadata: {
            op: "delete",
            urn: "urn:pulumi:sim::gpuhost::command:local:Command::x",
            type: "command:local:Command",
          },
        },
      }),
    ]);
    const report = parseRefreshOutput(out);
    expect(report.otherChanges).toEqual([{ urn: "urn:pulumi:sim::gpuhost::command:local:Command::x", op: "delete" }]);
    expect(exitCodeOf(report)).toBe(1);
  });

  it("the one-document digest (streaming off) still gives a verdict, with details marked unknown", () => {
    const digest = JSON.stringify({
      steps: [
        {
          op: "refresh",
          urn: urnOf("t"),
          newState: { type: TOOLKIT_STATE_TYPE, outputs: { hostLabel: "local", drift: [] } },
        },
      ],
      changeSummary: { same: 1, update: 1 },
    });
    expect(exitCodeOf(parseRefreshOutput(digest))).toBe(0);
    const changed = digest.replace('"op":"refresh"', '"op":"update"');
    const report = parseRefreshOutput(changed);
    expect(exitCodeOf(report)).toBe(1);
    expect(report.hosts[0].drift[0].field).toBe("(details not reported)");
  });
});

// A fleet's resources as the engine streams them: FleetVerification (a top-level dynamic resource)
// and each host's VerifiedGeneration (under its GpuServingHost), outputs as their providers write them.
const ROUTER = "http://127.0.0.1:31410";
const FLEET_URN = `urn:pulumi:sim-fleet::gpuhost::${FLEET_VERIFICATION_TYPE}::fleet-verified`;
const verifiedUrn = (host: string) =>
  `urn:pulumi:sim-fleet::gpuhost::gpuhost:index:GpuServingHost$${VERIFIED_GENERATION_TYPE}::${host}-verified`;

function refreshEvents(urn: string, type: string, old: Record<string, unknown>, fresh: Record<string, unknown>) {
  const state = (outputs: Record<string, unknown>) => ({ type, urn, custom: true, id: `${type}-id`, outputs });
  const changed = JSON.stringify(old) !== JSON.stringify(fresh);
  return [
    line({
      resourcePreEvent: {
        metadata: { op: "refresh", urn, type, old: state(old), new: state(old), detailedDiff: null },
        planning: true,
      },
    }),
    line({
      resOutputsEvent: {
        metadata: {
          op: changed ? "update" : "same",
          urn,
          type,
          old: state(old),
          new: state(fresh),
          detailedDiff: null,
        },
        planning: true,
      },
    }),
  ];
}

function fleetEvents(drift: unknown[]): string[] {
  const outputs = (d: unknown[]) => ({
    router: { url: ROUTER, metricsUrl: "http://127.0.0.1:31419/metrics", model: "tiny" },
    apiKey: "[secret]",
    endpoint: ROUTER,
    sustainedOutputTokensPerSecond: 76600.3,
    drift: d,
  });
  return refreshEvents(FLEET_URN, FLEET_VERIFICATION_TYPE, outputs([]), outputs(drift));
}

function generationEvents(host: string, url: string, generating: boolean, check = "ok"): string[] {
  const outputs = (g: boolean, c: string) => ({
    endpoint: { url, model: "tiny" },
    apiKey: "[secret]",
    generating: g,
    generationCheck: c,
  });
  return refreshEvents(verifiedUrn(host), VERIFIED_GENERATION_TYPE, outputs(true, "ok"), outputs(generating, check));
}

const WORKER_FAILED: Drift = {
  field: "workers.sim-fleet-2",
  expected: "registered and healthy at http://127.0.0.1:31412",
  found: "failed in the router",
  repair:
    "pulumi up: FleetVerification re-registers the worker (after the host's own gate passed again, where it failed) and re-measures the fleet",
};

describe("drift report: the fleet's router and each host's generation", () => {
  it("a worker the router marked failed: named under its router with expected, found and repair; exit 1", () => {
    const report = parseRefreshOutput(
      stream(toolkitEvents("sim-fleet-1-toolkit-state", "local /h1", []), fleetEvents([WORKER_FAILED])),
      "sim-fleet",
    );
    expect(report.fleet).toEqual([
      { router: ROUTER, resources: ["fleet-verified"], status: "drift", drift: [WORKER_FAILED], errors: [] },
    ]);
    expect(report.otherChanges).toEqual([]);
    expect(exitCodeOf(report)).toBe(1);
    const text = formatReport(report);
    expect(text).toMatch(
      /^gpuhost drift \(stack sim-fleet\): DRIFT: 1 host\(s\) probed, 0 drifted, 0 could not be probed, 1 router\(s\) checked, 1 drifted or not checked\n/,
    );
    expect(text).toContain(
      [
        `router ${ROUTER} [fleet-verified]: DRIFT in 1 field(s)`,
        "  workers.sim-fleet-2",
        "    expected: registered and healthy at http://127.0.0.1:31412",
        "    found:    failed in the router",
        `    repair:   ${WORKER_FAILED.repair}`,
      ].join("\n"),
    );
  });

  it("a stopped host: its unit (ToolkitState), its generation (VerifiedGeneration) and the router's worker, each named", () => {
    const unit: Drift = {
      field: "units./etc/systemd/system/sglang-autoregressive.service.active",
      expected: "active",
      found: "inactive",
      repair: "systemctl start sglang-autoregressive.service",
    };
    const report = parseRefreshOutput(
      stream(
        toolkitEvents("sim-fleet-2-toolkit-state", "local /h2", [unit]),
        generationEvents("sim-fleet-1", "http://127.0.0.1:31411", true),
        generationEvents("sim-fleet-2", "http://127.0.0.1:31412", false, 'phase "connect": connection refused'),
        fleetEvents([WORKER_FAILED]),
      ),
    );
    expect(report.hosts[0]).toMatchObject({ host: "local /h2", status: "drift", drift: [unit] });
    expect(report.services).toEqual([
      {
        endpoint: "http://127.0.0.1:31411",
        resources: ["sim-fleet-1-verified"],
        status: "clean",
        drift: [],
        errors: [],
      },
      {
        endpoint: "http://127.0.0.1:31412",
        resources: ["sim-fleet-2-verified"],
        status: "drift",
        drift: [
          {
            field: "generating",
            expected: "a real generation (one small chat completion)",
            found: 'none: phase "connect": connection refused',
            repair: expect.stringContaining("the gate verifies the service again") as string,
          },
        ],
        errors: [],
      },
    ]);
    expect(report.fleet?.[0].drift).toEqual([WORKER_FAILED]);
    expect(exitCodeOf(report)).toBe(1);
    const text = formatReport(report);
    expect(text).toContain(
      "service http://127.0.0.1:31412 [sim-fleet-2-verified]: DRIFT in 1 field(s)\n  generating\n",
    );
    expect(text).toContain(", 2 service(s) checked, 1 not generating or not checked, 1 router(s) checked, 1 drifted");
  });

  it("a clean fleet: exit 0, the router listed clean", () => {
    const report = parseRefreshOutput(stream(fleetEvents([]), generationEvents("h", "http://127.0.0.1:1", true)));
    expect(exitCodeOf(report)).toBe(0);
    expect(report.fleet?.map((f) => f.status)).toEqual(["clean"]);
    expect(formatReport(report)).toContain(`router ${ROUTER} [fleet-verified]: clean`);
  });

  it("a router that does not answer, another smg, a stranger in the router: each a field", () => {
    const drift: Drift[] = [
      { field: "router", expected: `answering at ${ROUTER}`, found: "unreachable: fetch failed", repair: "restart" },
      { field: "router.version", expected: "smg 1.13.0", found: "smg-1.12.0", repair: "reinstall" },
      { field: "workers.http://10.0.0.9:30000", expected: "absent", found: "in the router", repair: "remove" },
    ];
    const report = parseRefreshOutput(stream(fleetEvents(drift)));
    expect(report.fleet?.[0].drift.map((d) => d.field)).toEqual([
      "router",
      "router.version",
      "workers.http://10.0.0.9:30000",
    ]);
    expect(exitCodeOf(report)).toBe(1);
  });

  it("state written before drift was structured (lines): each line is one entry, found = the line", () => {
    const report = parseRefreshOutput(
      stream(fleetEvents(["sim-fleet-2 http://127.0.0.1:31412: failed in the router"])),
    );
    expect(report.fleet?.[0].drift).toEqual([
      {
        field: "router",
        expected: null,
        found: "sim-fleet-2 http://127.0.0.1:31412: failed in the router",
        repair: "pulumi up: FleetVerification re-registers the stack's workers and re-measures the fleet",
      },
    ]);
  });

  it("a FleetVerification whose read failed is not checked (exit 10) under its router", () => {
    const out = stream(fleetEvents([]).slice(0, 1), [
      line({
        diagnosticEvent: { urn: FLEET_URN, message: "read failed: boom\n", severity: "error" },
      }),
    ]).replace('"result":"succeeded"', '"result":"failed"');
    const report = parseRefreshOutput(out);
    expect(report.fleet).toEqual([
      { router: ROUTER, resources: ["fleet-verified"], status: "error", drift: [], errors: ["read failed: boom"] },
    ]);
    expect(report.errors).toEqual([]);
    expect(exitCodeOf(report)).toBe(10);
  });
});

describe("drift report of a recorded refresh: sim-fleet with sim-fleet-2's service stopped", () => {
  // fixtures/refresh-fleet-host-stopped.jsonl: the events `gpuhost drift` read in the sim-fleet engine
  // test (pulumi v3.276.0, streaming JSON), kept for the dynamic resources of sim-fleet-1 and -2 and
  // the FleetVerification, each state's outputs trimmed to the keys the report reads (secrets stay
  // the engine's "[secret]"), the other resources' events and the debug diagnostics left out.
  const recorded = fs.readFileSync(path.join(__dirname, "fixtures", "refresh-fleet-host-stopped.jsonl"), "utf8");

  it("names the stopped host three ways: its unit, its generation, the router's worker; exit 1", () => {
    const report = parseRefreshOutput(recorded, "sim-fleet");
    expect(report.errors).toEqual([]);
    expect(report.otherChanges).toEqual([]);
    expect(exitCodeOf(report)).toBe(1);
    expect(report.hosts).toEqual([
      {
        host: "local .gpuhost/sim-hosts/fleet-qxfw35/h2",
        resources: ["sim-fleet-2-toolkit-state"],
        status: "drift",
        drift: [
          expect.objectContaining({
            field: "units./etc/systemd/system/sglang-autoregressive.service.active",
            expected: "active",
            found: "inactive",
          }),
        ],
        errors: [],
      },
    ]);
    expect(report.services?.map((x) => [x.resources[0], x.status, x.drift.map((d) => d.found)])).toEqual([
      ["sim-fleet-2-verified", "drift", ["none: connection refused"]],
      ["sim-fleet-1-verified", "clean", []],
    ]);
    expect(report.fleet).toEqual([
      {
        router: "http://127.0.0.1:45861",
        resources: ["fleet-verified"],
        status: "drift",
        drift: [
          {
            field: "workers.sim-fleet-2",
            expected: "registered and healthy at http://127.0.0.1:37059",
            found: "failed in the router",
            repair:
              "pulumi up: FleetVerification re-registers the worker (after the host's own gate passed again, where it failed) and re-measures the fleet",
          },
        ],
        errors: [],
      },
    ]);
    expect(formatReport(report)).toContain(
      "router http://127.0.0.1:45861 [fleet-verified]: DRIFT in 1 field(s)\n  workers.sim-fleet-2\n    expected: registered and healthy at http://127.0.0.1:37059\n    found:    failed in the router\n",
    );
  });
});

describe("gpuhost drift (engine mocked: a stand-in runPulumi prints recorded events)", () => {
  const capture = () => {
    let out = "";
    let err = "";
    return {
      deps: { out: (t: string) => void (out += t), err: (t: string) => void (err += t) },
      text: () => out,
      errText: () => err,
    };
  };

  it("runs refresh --preview-only --expect-no-changes --json with streaming on, for the given stack; exit 1 on drift", async () => {
    const calls: { args: string[]; env: unknown }[] = [];
    const c = capture();
    const code = await driftMain(["--stack", "prod"], {
      ...c.deps,
      runPulumi: async (args, opts) => {
        calls.push({ args, env: opts?.env });
        return {
          code: 7,
          stdout: stream(toolkitEvents("t", "local", CURAND)),
          stderr: "error: no changes were expected for refresh but changes were proposed\n",
        };
      },
    });
    expect(calls).toEqual([
      {
        args: ["refresh", "--preview-only", "--expect-no-changes", "--json", "--stack", "prod"],
        env: { PULUMI_ENABLE_STREAMING_JSON_PREVIEW: "true" },
      },
    ]);
    expect(code).toBe(1);
    expect(c.text()).toContain("packages.libcurand-dev-13-0");
  });

  it("--json prints the report with its outcome and exit code; exit 0 when clean", async () => {
    const c = capture();
    const code = await driftMain(["--json"], {
      ...c.deps,
      runPulumi: async () => ({ code: 0, stdout: stream(toolkitEvents("t", "local", [])), stderr: "" }),
    });
    expect(code).toBe(0);
    const parsed = JSON.parse(c.text()) as { exitCode: number; outcome: string; hosts: { status: string }[] };
    expect(parsed.exitCode).toBe(0);
    expect(parsed.outcome).toBe("clean");
    expect(parsed.hosts[0].status).toBe("clean");
  });

  it("--json carries the router's drift; text names it; exit 1", async () => {
    const events = stream(fleetEvents([WORKER_FAILED]));
    const c = capture();
    const code = await driftMain(["--stack", "sim-fleet", "--json"], {
      ...c.deps,
      runPulumi: async () => ({ code: 7, stdout: events, stderr: "" }),
    });
    expect(code).toBe(1);
    const parsed = JSON.parse(c.text()) as { exitCode: number; fleet: { router: string; drift: Drift[] }[] };
    expect(parsed.exitCode).toBe(1);
    expect(parsed.fleet).toEqual([expect.objectContaining({ router: ROUTER, drift: [WORKER_FAILED] })]);
    const t = capture();
    expect(
      await driftMain(["--stack", "sim-fleet"], {
        ...t.deps,
        runPulumi: async () => ({ code: 7, stdout: events, stderr: "" }),
      }),
    ).toBe(1);
    expect(t.text()).toContain(
      "  workers.sim-fleet-2\n    expected: registered and healthy at http://127.0.0.1:31412\n",
    );
  });

  it("an engine that cannot start is the engine failure (exit 11) with the reason", async () => {
    const c = capture();
    const code = await driftMain([], {
      ...c.deps,
      runPulumi: async () => {
        throw new Error(".gpuhost/engine/bin/pulumi is missing: run `npm run setup`");
      },
    });
    expect(code).toBe(11);
    expect(c.text()).toContain("error: .gpuhost/engine/bin/pulumi is missing");
  });

  it("bad arguments are exit 2 with usage; --help is exit 0", async () => {
    const c = capture();
    expect(await driftMain(["--frobnicate"], c.deps)).toBe(2);
    expect(c.errText()).toContain("usage: gpuhost drift");
    expect(await driftMain(["--stack", "a b;rm"], c.deps)).toBe(2);
    expect(await driftMain(["--help"], c.deps)).toBe(0);
    expect(refreshArgs(undefined)).toEqual(["refresh", "--preview-only", "--expect-no-changes", "--json"]);
  });
});
