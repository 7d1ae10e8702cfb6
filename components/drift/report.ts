// Turns the engine's JSON for `pulumi refresh --preview-only --expect-no-changes --json` into a
// drift report grouped by host. The exit code of that command does not separate "drift" from
// "error" (pulumi#8992), so the verdict comes from the events, never from the exit status.
//
// With PULUMI_ENABLE_STREAMING_JSON_PREVIEW=true the engine prints one JSON event per line; a
// refresh's resOutputsEvent carries the freshly read outputs (the `drift` list ToolkitState's read
// computed). The non-streaming digest only repeats the old state, so it can tell THAT a resource
// changed but not what: it is accepted as a fallback with the details marked unknown.
import type { Drift } from "./schema";

export const TOOLKIT_STATE_TYPE = "pulumi-nodejs:dynamic/gpuhost:ToolkitState";

export interface HostReport {
  /** Where the probe ran, e.g. "ssh root@gpu1:22" or "local /path" (a folder standing for /). */
  host: string;
  /** ToolkitState resources probed on this host (URN names). */
  resources: string[];
  status: "clean" | "drift" | "error";
  drift: Drift[];
  errors: string[];
}

export interface DriftReport {
  stack?: string;
  hosts: HostReport[];
  /** Resources other than ToolkitState that a refresh would change (op per URN). */
  otherChanges: { urn: string; op: string }[];
  /** Errors not tied to one host (the engine failed, the output was unreadable). */
  errors: string[];
}

interface ResourceMeta {
  op?: string;
  urn?: string;
  type?: string;
  old?: { outputs?: Record<string, unknown> } | null;
  new?: { outputs?: Record<string, unknown> } | null;
}

type Diagnostic = { urn?: string; message?: string; severity?: string };
type StepState = { type?: string; outputs?: Record<string, unknown> };
/** The parts of `pulumi refresh --json` events the report reads (the digest, or streamed events). */
interface EngineEvent {
  steps?: { op?: string; urn?: string; oldState?: StepState; newState?: StepState }[];
  changeSummary?: unknown;
  diagnostics?: Diagnostic[];
  resOutputsEvent?: { metadata?: ResourceMeta };
  resourcePreEvent?: { metadata?: ResourceMeta };
  diagnosticEvent?: Diagnostic;
  summaryEvent?: { result?: string };
}

const CLEAN_OPS = new Set(["same", "read", "refresh"]);
const EXPECT_NO_CHANGES = /no changes were expected/i;

function urnName(urn: string): string {
  return urn.slice(urn.lastIndexOf("::") + 2);
}
function urnType(urn: string): string {
  const parts = urn.split("::");
  const qualified = parts[2] ?? "";
  return qualified.slice(qualified.lastIndexOf("$") + 1);
}

function isDrift(value: unknown): value is Drift {
  const d = value as Drift;
  return typeof d === "object" && d !== null && typeof d.field === "string" && typeof d.repair === "string";
}

/** Parse the engine's stdout (streamed events, or the one-document digest) into a report. */
export function parseRefreshOutput(stdout: string, stack?: string): DriftReport {
  const report: DriftReport = { stack, hosts: [], otherChanges: [], errors: [] };
  const hosts = new Map<string, HostReport>();
  const hostOfUrn = new Map<string, string>();
  const hostFor = (label: string): HostReport => {
    let h = hosts.get(label);
    if (!h) hosts.set(label, (h = { host: label, resources: [], status: "clean", drift: [], errors: [] }));
    return h;
  };
  const labelOf = (meta: ResourceMeta): string => {
    const label = meta.new?.outputs?.hostLabel ?? meta.old?.outputs?.hostLabel;
    return typeof label === "string" ? label : `unknown host (${urnName(meta.urn ?? "?")})`;
  };

  const events: unknown[] = [];
  const text = stdout.trim();
  if (text === "") {
    report.errors.push("pulumi printed no JSON");
    return report;
  }
  try {
    events.push(JSON.parse(text));
  } catch {
    for (const line of text.split("\n")) {
      if (line.trim() === "") continue;
      try {
        events.push(JSON.parse(line));
      } catch {
        report.errors.push(`unreadable line in pulumi's JSON output: ${line.slice(0, 200)}`);
      }
    }
  }

  let sawSummary = false;
  const onResult = (meta: ResourceMeta, detailsKnown: boolean): void => {
    const urn = meta.urn ?? "";
    const op = meta.op ?? "unknown";
    if ((meta.type ?? urnType(urn)) !== TOOLKIT_STATE_TYPE) {
      if (!CLEAN_OPS.has(op)) report.otherChanges.push({ urn, op });
      return;
    }
    const label = labelOf(meta);
    hostOfUrn.set(urn, label);
    const host = hostFor(label);
    if (!host.resources.includes(urnName(urn))) host.resources.push(urnName(urn));
    // A read refused on the host key kept the old record: the host was not probed, so it is not clean.
    const refused = meta.new?.outputs?.hostKeyRefused;
    if (detailsKnown && typeof refused === "string") {
      host.errors.push(`not probed: ${refused}`);
      return;
    }
    if (CLEAN_OPS.has(op)) return;
    const drift = meta.new?.outputs?.drift;
    if (detailsKnown && Array.isArray(drift) && drift.every(isDrift) && drift.length > 0) {
      host.drift.push(...drift);
    } else if (op === "delete") {
      host.drift.push({
        field: "resource",
        expected: "present",
        found: null,
        repair: "the ToolkitState record is gone: pulumi up",
      });
    } else {
      host.drift.push({
        field: "(details not reported)",
        expected: null,
        found: null,
        repair: `refresh would ${op} ${urnName(urn)}: run pulumi refresh --preview-only --diff to see it`,
      });
    }
  };

  for (const ev of events as EngineEvent[]) {
    if (Array.isArray(ev.steps) || ev.changeSummary) {
      // The one-document digest (streaming disabled): ops only.
      sawSummary = true;
      for (const step of ev.steps ?? [])
        onResult(
          { op: step.op, urn: step.urn, type: step.newState?.type, old: step.oldState, new: step.newState },
          false,
        );
      for (const d of ev.diagnostics ?? []) onDiagnostic(d);
      continue;
    }
    if (ev.resOutputsEvent?.metadata) onResult(ev.resOutputsEvent.metadata, true);
    else if (ev.resourcePreEvent?.metadata) {
      const meta = ev.resourcePreEvent.metadata;
      if ((meta.type ?? urnType(meta.urn ?? "")) === TOOLKIT_STATE_TYPE) hostOfUrn.set(meta.urn ?? "", labelOf(meta));
    } else if (ev.diagnosticEvent) onDiagnostic(ev.diagnosticEvent);
    else if (ev.summaryEvent) {
      sawSummary = true;
      if (ev.summaryEvent.result && ev.summaryEvent.result !== "succeeded") {
        if (report.errors.length === 0 && [...hosts.values()].every((h) => h.errors.length === 0)) {
          report.errors.push(`refresh ${ev.summaryEvent.result}`);
        }
      }
    }
  }
  if (!sawSummary)
    report.errors.push("pulumi's output ended before the refresh summary (the engine failed or was killed)");

  function onDiagnostic(d: Diagnostic): void {
    if (d.severity !== "error") return;
    // Terminal colour codes (ESC [ ... m) are stripped: ESC is written as a code point, not a control character.
    const message = (d.message ?? "").replace(new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, "g"), "").trim();
    if (EXPECT_NO_CHANGES.test(message)) return; // the drift signal itself, not an error
    const label = d.urn ? hostOfUrn.get(d.urn) : undefined;
    if (label !== undefined) {
      const host = hostFor(label);
      if (d.urn && !host.resources.includes(urnName(d.urn))) host.resources.push(urnName(d.urn));
      host.errors.push(message);
    } else report.errors.push(d.urn ? `${urnName(d.urn)}: ${message}` : message);
  }

  for (const h of hosts.values()) h.status = h.errors.length > 0 ? "error" : h.drift.length > 0 ? "drift" : "clean";
  report.hosts = [...hosts.values()].sort((a, b) => a.host.localeCompare(b.host));
  return report;
}

/** For cron: 0 clean, 1 drift, 2 error (an error wins: a host that could not be probed is not clean). */
export function exitCodeOf(report: DriftReport): 0 | 1 | 2 {
  if (report.errors.length > 0 || report.hosts.some((h) => h.status === "error")) return 2;
  if (report.hosts.some((h) => h.status === "drift") || report.otherChanges.length > 0) return 1;
  return 0;
}

/** The human-readable report. */
export function formatReport(report: DriftReport): string {
  const lines: string[] = [];
  const drifted = report.hosts.filter((h) => h.status === "drift").length;
  const failed = report.hosts.filter((h) => h.status === "error").length;
  const where = report.stack ? `stack ${report.stack}` : "current stack";
  const verdict = exitCodeOf(report) === 0 ? "clean" : exitCodeOf(report) === 1 ? "DRIFT" : "ERROR";
  lines.push(
    `gpuhost drift (${where}): ${verdict}: ${report.hosts.length} host(s) probed, ${drifted} drifted, ${failed} could not be probed`,
  );
  if (report.hosts.length === 0 && report.errors.length === 0)
    lines.push("  no ToolkitState resource in this stack: nothing to compare");
  for (const h of report.hosts) {
    lines.push("");
    lines.push(
      `host ${h.host} [${h.resources.join(", ")}]: ${h.status === "clean" ? "clean" : h.status === "drift" ? `DRIFT in ${h.drift.length} field(s)` : "ERROR"}`,
    );
    for (const e of h.errors) lines.push(`  error: ${e}`);
    for (const d of h.drift) {
      lines.push(`  ${d.field}`);
      lines.push(`    expected: ${d.expected ?? "(absent)"}`);
      lines.push(`    found:    ${d.found ?? "(absent)"}`);
      lines.push(`    repair:   ${d.repair}`);
    }
  }
  if (report.otherChanges.length > 0) {
    lines.push("");
    lines.push("other resources a refresh would change:");
    for (const c of report.otherChanges) lines.push(`  ${c.op} ${c.urn}`);
  }
  if (report.errors.length > 0) {
    lines.push("");
    for (const e of report.errors) lines.push(`error: ${e}`);
  }
  if (drifted > 0) {
    lines.push("");
    lines.push("After repairing on the host, run `gpuhost drift` again; `pulumi up --refresh` re-records the state.");
  }
  return `${lines.join("\n")}\n`;
}
