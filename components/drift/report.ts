// Turns the engine's JSON for `pulumi refresh --preview-only --expect-no-changes --json` into a
// drift report grouped by host (ToolkitState), by serving endpoint (VerifiedGeneration: does it still
// generate) and by router (FleetVerification: the router's workers, version and machine against the
// stack's). The verdict on the hosts comes from the events; the engine's exit status and stderr name
// the failures that leave no events (components/drift/outcome.ts: no such stack, secrets, a lock, a
// timeout), and a non-zero status after events that found nothing says the engine failed.
//
// With PULUMI_ENABLE_STREAMING_JSON_PREVIEW=true the engine prints one JSON event per line; a
// refresh's resOutputsEvent carries the freshly read outputs (the `drift` list ToolkitState's read
// computed). The non-streaming digest only repeats the old state, so it can tell THAT a resource
// changed but not what: it is accepted as a fallback with the details marked unknown.
import { type DriftFailure, type DriftOutcome, exitCodeOfOutcome } from "./outcome";
import type { Drift } from "./schema";
import type { HealthCheck } from "../../gate/health/health";

export const TOOLKIT_STATE_TYPE = "pulumi-nodejs:dynamic/gpuhost:ToolkitState";
export const VERIFIED_GENERATION_TYPE = "pulumi-nodejs:dynamic/gpuhost:VerifiedGeneration";
export const FLEET_VERIFICATION_TYPE = "pulumi-nodejs:dynamic/gpuhost:FleetVerification";

/** What the refresh found for one thing it re-read (a host, a service, a router). */
export interface Finding {
  /** The resources re-read for it (URN names). */
  resources: string[];
  status: "clean" | "drift" | "error";
  drift: Drift[];
  errors: string[];
}

export interface HostReport extends Finding {
  /** Where the probe ran, e.g. "ssh root@gpu1:22" or "local /path" (a folder standing for /). */
  host: string;
}

/** VerifiedGeneration's refresh: one small generation; a service that no longer generates drifted. */
export interface ServiceReport extends Finding {
  /** The service's URL as the gate reaches it (on an SSH host, as seen on the host). */
  endpoint: string;
  /** The model's health as the refresh measured it (the answer, decode tok/s, acceptance); absent when none ran. */
  health?: HealthCheck;
}

/** FleetVerification's refresh: the router's /workers and version against the stack's. */
export interface FleetReport extends Finding {
  /** The router's URL, as reached from where `pulumi up` runs. */
  router: string;
}

export interface DriftReport {
  stack?: string;
  hosts: HostReport[];
  /** Each host's serving endpoint (VerifiedGeneration); absent in reports of older versions. */
  services?: ServiceReport[];
  /** Each router of a fleet (FleetVerification); absent in reports of older versions. */
  fleet?: FleetReport[];
  /** Resources of any other type that a refresh would change (op per URN). */
  otherChanges: { urn: string; op: string }[];
  /** Errors not tied to one host (the engine failed, the output was unreadable). */
  errors: string[];
  /** A failure named before or besides the events (outcome.ts engineFailure, the stack's access). */
  failure?: DriftFailure;
  /** The engine's exit status, when it ran. */
  engineExit?: number;
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

const REPAIR_FLEET = "pulumi up: FleetVerification re-registers the stack's workers and re-measures the fleet";

/**
 * The drift a resource's fresh outputs carry. FleetVerification before provider version 2 wrote
 * lines ("h2 http://h2:1: missing from the router"): each becomes one entry, found = the line.
 */
function driftOf(type: string, outputs: Record<string, unknown> | undefined): Drift[] {
  if (type === VERIFIED_GENERATION_TYPE && outputs?.generating !== false) {
    // Generating: what it says of itself (the model's health: answer, decode speed, acceptance).
    return Array.isArray(outputs?.drift) ? outputs.drift.filter(isDrift) : [];
  }
  if (type === VERIFIED_GENERATION_TYPE) {
    const check = typeof outputs?.generationCheck === "string" ? outputs.generationCheck : "no answer";
    return [
      {
        field: "generating",
        expected: "a real generation (one small chat completion)",
        found: `none: ${check}`,
        repair:
          "pulumi up: the host's drift (above) is repaired, then the gate verifies the service again; behind a router it is registered again once it passes",
      },
    ];
  }
  const drift = outputs?.drift;
  if (!Array.isArray(drift)) return [];
  return drift.flatMap((d): Drift[] =>
    isDrift(d)
      ? [d]
      : type === FLEET_VERIFICATION_TYPE && typeof d === "string"
        ? [{ field: "router", expected: null, found: d, repair: REPAIR_FLEET }]
        : [],
  );
}

/** What the parse has gathered so far: the report, and each finding by what it is about and by URN. */
interface Parse {
  report: DriftReport;
  hosts: Map<string, HostReport>;
  services: Map<string, ServiceReport>;
  routers: Map<string, FleetReport>;
  findingOfUrn: Map<string, Finding>;
  sawSummary: boolean;
}

/** Parse the engine's stdout (streamed events, or the one-document digest) into a report. */
export function parseRefreshOutput(stdout: string, stack?: string): DriftReport {
  const report: DriftReport = { stack, hosts: [], services: [], fleet: [], otherChanges: [], errors: [] };
  const text = stdout.trim();
  if (text === "") {
    report.errors.push("pulumi printed no JSON");
    return report;
  }
  const parse: Parse = {
    report,
    hosts: new Map(),
    services: new Map(),
    routers: new Map(),
    findingOfUrn: new Map(),
    sawSummary: false,
  };
  for (const ev of eventsOf(text, report) as EngineEvent[]) onEvent(parse, ev);
  if (!parse.sawSummary)
    report.errors.push("pulumi's output ended before the refresh summary (the engine failed or was killed)");
  return finishReport(parse);
}

/** The one-document digest, or one event per line; a line that is not JSON is named in the report. */
function eventsOf(text: string, report: DriftReport): unknown[] {
  try {
    return [JSON.parse(text)];
  } catch {
    const events: unknown[] = [];
    for (const line of text.split("\n")) {
      if (line.trim() === "") continue;
      try {
        events.push(JSON.parse(line));
      } catch {
        report.errors.push(`unreadable line in pulumi's JSON output: ${line.slice(0, 200)}`);
      }
    }
    return events;
  }
}

function onEvent(parse: Parse, ev: EngineEvent): void {
  if (Array.isArray(ev.steps) || ev.changeSummary) onDigest(parse, ev);
  else if (ev.resOutputsEvent?.metadata) onResult(parse, ev.resOutputsEvent.metadata, true);
  else if (ev.resourcePreEvent?.metadata) {
    const meta = ev.resourcePreEvent.metadata;
    findingOf(parse, meta, meta.type ?? urnType(meta.urn ?? ""));
  } else if (ev.diagnosticEvent) onDiagnostic(parse, ev.diagnosticEvent);
  else if (ev.summaryEvent) onSummary(parse, ev.summaryEvent);
}

/** The one-document digest (streaming disabled): ops only. */
function onDigest(parse: Parse, ev: EngineEvent): void {
  parse.sawSummary = true;
  for (const step of ev.steps ?? [])
    onResult(
      parse,
      { op: step.op, urn: step.urn, type: step.newState?.type, old: step.oldState, new: step.newState },
      false,
    );
  for (const d of ev.diagnostics ?? []) onDiagnostic(parse, d);
}

/** A refresh that did not succeed is an error of its own only when nothing else already says why. */
function onSummary(parse: Parse, summary: { result?: string }): void {
  parse.sawSummary = true;
  if (summary.result && summary.result !== "succeeded") {
    if (parse.report.errors.length === 0 && [...parse.findingOfUrn.values()].every((h) => h.errors.length === 0)) {
      parse.report.errors.push(`refresh ${summary.result}`);
    }
  }
}

function outputOf(meta: ResourceMeta, read: (o: Record<string, unknown>) => unknown): string | undefined {
  const v = [meta.new?.outputs, meta.old?.outputs].map((o) => (o ? read(o) : undefined)).find((x) => x);
  return typeof v === "string" ? v : undefined;
}

/** The finding a resource reports into, by its type; undefined for types the report does not know. */
function findingOf(parse: Parse, meta: ResourceMeta, type: string): Finding | undefined {
  const name = urnName(meta.urn ?? "?");
  const fresh = (): Finding => ({ resources: [], status: "clean", drift: [], errors: [] });
  const { hosts, services, routers } = parse;
  let found: Finding | undefined;
  if (type === TOOLKIT_STATE_TYPE) {
    const label = outputOf(meta, (o) => o.hostLabel) ?? `unknown host (${name})`;
    found = hosts.get(label) ?? hosts.set(label, { host: label, ...fresh() }).get(label);
  } else if (type === VERIFIED_GENERATION_TYPE) {
    const url = outputOf(meta, (o) => (o.endpoint as { url?: unknown } | undefined)?.url) ?? `unknown (${name})`;
    found = services.get(url) ?? services.set(url, { endpoint: url, ...fresh() }).get(url);
  } else if (type === FLEET_VERIFICATION_TYPE) {
    const url = outputOf(meta, (o) => (o.router as { url?: unknown } | undefined)?.url) ?? `unknown (${name})`;
    found = routers.get(url) ?? routers.set(url, { router: url, ...fresh() }).get(url);
  }
  if (found && meta.urn) parse.findingOfUrn.set(meta.urn, found);
  return found;
}

function onResult(parse: Parse, meta: ResourceMeta, detailsKnown: boolean): void {
  const urn = meta.urn ?? "";
  const op = meta.op ?? "unknown";
  const type = meta.type ?? urnType(urn);
  const host = findingOf(parse, meta, type);
  if (!host) {
    if (!CLEAN_OPS.has(op)) parse.report.otherChanges.push({ urn, op });
    return;
  }
  if (!host.resources.includes(urnName(urn))) host.resources.push(urnName(urn));
  if (detailsKnown && !recordChecks(host, meta, type)) return;
  if (CLEAN_OPS.has(op)) return;
  host.drift.push(...resultDrift(meta, type, op, detailsKnown));
}

/**
 * What a read says of its own checks (only streamed events carry it): false when the host was not
 * probed at all, so nothing else of the result counts.
 */
function recordChecks(host: Finding, meta: ResourceMeta, type: string): boolean {
  // A read refused on the host key kept the old record: the host was not probed, so it is not clean.
  const refused = meta.new?.outputs?.hostKeyRefused;
  if (typeof refused === "string") {
    host.errors.push(`not probed: ${refused}`);
    return false;
  }
  // A service whose health could not be measured is not called healthy: not checked, whatever the op.
  const unchecked = meta.new?.outputs?.notChecked;
  if (typeof unchecked === "string") host.errors.push(unchecked);
  const health = meta.new?.outputs?.healthCheck;
  if (type === VERIFIED_GENERATION_TYPE && typeof health === "object" && health !== null)
    (host as ServiceReport).health = health as HealthCheck;
  return true;
}

/** A changed resource's drift: its own list when known, else what the op alone says. */
function resultDrift(meta: ResourceMeta, type: string, op: string, detailsKnown: boolean): Drift[] {
  const drift = driftOf(type, meta.new?.outputs);
  if (detailsKnown && drift.length > 0) return drift;
  if (op === "delete") {
    return [
      {
        field: "resource",
        expected: "present",
        found: null,
        repair: `the ${type.slice(type.lastIndexOf(":") + 1)} record is gone: pulumi up`,
      },
    ];
  }
  return [
    {
      field: "(details not reported)",
      expected: null,
      found: null,
      repair: `refresh would ${op} ${urnName(meta.urn ?? "")}: run pulumi refresh --preview-only --diff to see it`,
    },
  ];
}

function onDiagnostic(parse: Parse, d: Diagnostic): void {
  if (d.severity !== "error") return;
  // Terminal colour codes (ESC [ ... m) are stripped: ESC is written as a code point, not a control character.
  const message = (d.message ?? "").replace(new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, "g"), "").trim();
  if (EXPECT_NO_CHANGES.test(message)) return; // the drift signal itself, not an error
  const host = d.urn ? parse.findingOfUrn.get(d.urn) : undefined;
  if (host !== undefined) {
    if (d.urn && !host.resources.includes(urnName(d.urn))) host.resources.push(urnName(d.urn));
    host.errors.push(message);
  } else parse.report.errors.push(d.urn ? `${urnName(d.urn)}: ${message}` : message);
}

/** Each finding's status from what it gathered; hosts, services and routers each in name order. */
function finishReport(parse: Parse): DriftReport {
  const { report } = parse;
  for (const h of parse.findingOfUrn.values())
    h.status = h.errors.length > 0 ? "error" : h.drift.length > 0 ? "drift" : "clean";
  report.hosts = [...parse.hosts.values()].sort((a, b) => a.host.localeCompare(b.host));
  report.services = [...parse.services.values()].sort((a, b) => a.endpoint.localeCompare(b.endpoint));
  report.fleet = [...parse.routers.values()].sort((a, b) => a.router.localeCompare(b.router));
  return report;
}

/** Every finding of the report: hosts, then services, then routers. */
function findingsOf(report: DriftReport): Finding[] {
  return subjectsOf(report).map(([, f]) => f);
}

/** Every finding with what it is about (a host's label, a service's or a router's URL), in report order. */
export function subjectsOf(report: DriftReport): [string, Finding][] {
  return [
    ...report.hosts.map((h): [string, Finding] => [h.host, h]),
    ...(report.services ?? []).map((s): [string, Finding] => [s.endpoint, s]),
    ...(report.fleet ?? []).map((r): [string, Finding] => [r.router, r]),
  ];
}

/**
 * How the check ended. A failure wins over drift: a host that could not be probed is not clean, and
 * a check that did not finish is not a verdict. Events that found nothing with a non-zero engine
 * status: 7 is a change the events did not name (drift), any other status an engine that failed.
 */
export function outcomeOf(report: DriftReport): DriftOutcome {
  if (report.failure) return report.failure;
  const findings = findingsOf(report);
  if (report.errors.length > 0) return "engine";
  if (findings.some((h) => h.status === "error")) return "not-checked";
  if (findings.some((h) => h.status === "drift") || report.otherChanges.length > 0) return "drift";
  if (report.engineExit === 7) return "drift";
  if (report.engineExit !== undefined && report.engineExit !== 0) return "engine";
  return "clean";
}

/** For cron: outcome.ts's status of outcomeOf (0 clean, 1 drift, each failure its own). */
export function exitCodeOf(report: DriftReport): number {
  return exitCodeOfOutcome(outcomeOf(report));
}

/** The human-readable report. */
export function formatReport(report: DriftReport): string {
  const lines: string[] = [];
  const drifted = report.hosts.filter((h) => h.status === "drift").length;
  const failed = report.hosts.filter((h) => h.status === "error").length;
  const where = report.stack ? `stack ${report.stack}` : "current stack";
  const outcome = outcomeOf(report);
  const verdict = outcome === "clean" ? "clean" : outcome === "drift" ? "DRIFT" : `ERROR (${outcome})`;
  const services = report.services ?? [];
  const fleet = report.fleet ?? [];
  const count = (fs: Finding[], what: string, bad: string) =>
    fs.length > 0 ? `, ${fs.length} ${what}, ${fs.filter((f) => f.status !== "clean").length} ${bad}` : "";
  lines.push(
    `gpuhost drift (${where}): ${verdict}: ${report.hosts.length} host(s) probed, ${drifted} drifted, ${failed} could not be probed` +
      count(services, "service(s) checked", "not generating or not checked") +
      count(fleet, "router(s) checked", "drifted or not checked"),
  );
  if (findingsOf(report).length === 0 && report.errors.length === 0)
    lines.push("  no ToolkitState resource in this stack: nothing to compare");
  const section = (title: string, h: Finding) => {
    lines.push("");
    lines.push(
      `${title} [${h.resources.join(", ")}]: ${h.status === "clean" ? "clean" : h.status === "drift" ? `DRIFT in ${h.drift.length} field(s)` : "ERROR"}`,
    );
    for (const e of h.errors) lines.push(`  error: ${e}`);
    for (const d of h.drift) {
      lines.push(`  ${d.field}`);
      lines.push(`    expected: ${d.expected ?? "(absent)"}`);
      lines.push(`    found:    ${d.found ?? "(absent)"}`);
      lines.push(`    repair:   ${d.repair}`);
    }
  };
  for (const h of report.hosts) section(`host ${h.host}`, h);
  for (const h of services) section(`service ${h.endpoint}`, h);
  for (const h of fleet) section(`router ${h.router}`, h);
  if (report.otherChanges.length > 0) {
    lines.push("");
    lines.push("other resources a refresh would change:");
    for (const c of report.otherChanges) lines.push(`  ${c.op} ${c.urn}`);
  }
  if (report.errors.length > 0) {
    lines.push("");
    for (const e of report.errors) lines.push(`error: ${e}`);
  }
  if (findingsOf(report).some((h) => h.status === "drift")) {
    lines.push("");
    lines.push("After repairing on the host, run `gpuhost drift` again; `pulumi up --refresh` re-records the state.");
  }
  return `${lines.join("\n")}\n`;
}
