// What `gpuhost drift` remembers between checks (components/drift/guard.ts, issue 27): the pause after
// a failed update (measured: `pulumi stack history --json` of 3.276.0 after a `pulumi up` that failed,
// fixtures/stack-history-failed-up.json), --repair's daily limit and its refusal to run twice for the
// same drift, the state file on the real filesystem; and the metrics each writes.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { testTempDir } from "../support/temp-dir";
import {
  afterRepair,
  driftItems,
  pausedBy,
  readDriftState,
  repairHold,
  stateFile,
  updateKey,
  writeDriftState,
} from "../../components/drift/guard";
import { driftExposition } from "../../components/drift/metrics";
import { exitCodeOfOutcome } from "../../components/drift/outcome";
import type { DriftReport } from "../../components/drift/report";
import { parseLastUpdate, stackLocks } from "../../engine/pulumi";

const tempDir = () => testTempDir("guard");

const DAY = Date.parse("2026-12-04T10:00:00Z");
const HOUR = 3_600_000;
const failedUp = fs.readFileSync(path.join(__dirname, "fixtures", "stack-history-failed-up.json"), "utf8");

describe("the pause after a failed update", () => {
  it("reads the measured history of a failed up: kind update, result failed, version 0", () => {
    const last = parseLastUpdate(failedUp)!;
    expect(last).toMatchObject({ kind: "update", result: "failed", version: 0, startTime: "2026-12-04T02:47:04.000Z" });
    expect(pausedBy(last, { day: "2026-12-04", repairs: 0 })).toBe(true);
  });

  it("a refresh after the failed up does not hide it; a later successful up ends the pause", () => {
    const [failed] = JSON.parse(failedUp) as object[];
    const refresh = { kind: "refresh", result: "succeeded", version: 0, startTime: "2026-12-04T03:00:00.000Z" };
    expect(parseLastUpdate(JSON.stringify([refresh, failed]))?.result).toBe("failed");
    const up = { kind: "update", result: "succeeded", version: 0, startTime: "2026-12-04T04:00:00.000Z" };
    expect(pausedBy(parseLastUpdate(JSON.stringify([up, refresh, failed])), { day: "2026-12-04", repairs: 0 })).toBe(
      false,
    );
    expect(parseLastUpdate("[]")).toBeUndefined();
  });

  it("--resume's acknowledgement holds for that failure only: the next failed up pauses again", () => {
    const last = parseLastUpdate(failedUp)!;
    const state = { day: "2026-12-04", repairs: 0, acknowledged: updateKey(last) };
    expect(pausedBy(last, state)).toBe(false);
    // the file backend numbers every update 0: the start time tells the next failure apart
    expect(pausedBy({ ...last, startTime: "2026-12-04T05:00:00.000Z" }, state)).toBe(true);
  });
});

describe("--repair's limits", () => {
  const items = ["local sim-1 files./usr/local/cuda-13.0/include/curand.h"];
  const fresh = { day: "2026-12-04", repairs: 0 };

  it("at most LIMIT a day, counted per UTC day", () => {
    const once = afterRepair(fresh, items, DAY);
    expect(once).toMatchObject({ day: "2026-12-04", repairs: 1 });
    expect(repairHold(once, ["other"], DAY + HOUR, 1)).toBe("daily-limit");
    expect(repairHold(once, ["other"], DAY + HOUR, 2)).toBeUndefined();
    // the next UTC day starts from 0
    expect(repairHold(once, ["other"], DAY + 24 * HOUR, 1)).toBeUndefined();
    expect(afterRepair(once, ["other"], DAY + 24 * HOUR)).toMatchObject({ day: "2026-12-05", repairs: 1 });
  });

  it("never twice for the same drift, whatever the day and the limit", () => {
    const once = afterRepair(fresh, items, DAY);
    expect(repairHold(once, [...items], DAY + HOUR, 5)).toBe("same-drift");
    expect(repairHold(once, [...items], DAY + 48 * HOUR, 5)).toBe("same-drift");
    expect(repairHold(once, [...items, "local sim-1 cudaLink"], DAY + HOUR, 5)).toBeUndefined();
  });

  it("the drift's items are its hosts' fields and the other resources' changes, sorted", () => {
    const report: DriftReport = {
      stack: "s",
      hosts: [
        {
          host: "h2",
          resources: [],
          status: "drift",
          drift: [{ field: "cudaLink", expected: "a", found: "b", repair: "" }],
          errors: [],
        },
        {
          host: "h1",
          resources: [],
          status: "drift",
          drift: [{ field: "files.x", expected: "a", found: null, repair: "" }],
          errors: [],
        },
      ],
      services: [],
      fleet: [],
      otherChanges: [{ op: "update", urn: "urn:x" }],
      errors: [],
    };
    expect(driftItems(report)).toEqual([" update urn:x", "h1 files.x", "h2 cudaLink"]);
  });
});

describe("the state file", () => {
  it("absent: a fresh state; written whole and read back; a foreign file refused in one sentence", () => {
    const file = stateFile("org/proj/prod", path.join(tempDir(), "gpuhost"));
    expect(path.basename(file)).toBe("drift-org_proj_prod.json");
    expect(readDriftState(file, DAY)).toEqual({ day: "2026-12-04", repairs: 0 });
    writeDriftState(file, { day: "2026-12-04", repairs: 2, lastRepaired: ["a"] });
    expect(readDriftState(file, DAY)).toEqual({ day: "2026-12-04", repairs: 2, lastRepaired: ["a"] });
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    fs.writeFileSync(file, '{"repairs":"many"}');
    expect(() => readDriftState(file, DAY)).toThrow(/is not a gpuhost drift state file: remove it/);
  });
});

describe("stackLocks on a file backend (the engine's own lock file layout)", () => {
  it("a live process's lock is held; a dead one's on this host is not; no locks folder: none", () => {
    const state = tempDir();
    const opts = { stateDir: state, cwd: tempDir() };
    fs.writeFileSync(path.join(opts.cwd, "Pulumi.yaml"), "name: proj\nruntime: nodejs\n");
    expect(stackLocks("prod", opts)).toEqual([]);
    const dir = path.join(state, ".pulumi", "locks", "organization", "proj", "prod");
    fs.mkdirSync(dir, { recursive: true });
    const lock = { pid: process.pid, username: "u", hostname: os.hostname(), timestamp: "2026-12-04T10:00:00Z" };
    fs.writeFileSync(path.join(dir, "a.json"), JSON.stringify(lock));
    // a pid no process has (above the kernel's pid_max)
    fs.writeFileSync(path.join(dir, "b.json"), JSON.stringify({ ...lock, pid: 4_194_304 + 7 }));
    expect(stackLocks("prod", opts)).toEqual([{ ...lock, file: path.join(dir, "a.json") }]);
    expect(stackLocks("other", opts)).toEqual([]);
    expect(
      stackLocks("prod", { ...opts, stateDir: undefined, env: { PULUMI_BACKEND_URL: "https://api.example.invalid" } }),
    ).toBeUndefined();
  });
});

describe("the metrics of a held check and of --repair", () => {
  const report: DriftReport = { stack: "prod", hosts: [], services: [], fleet: [], otherChanges: [], errors: [] };
  const timing = { endedAtMs: DAY, durationMs: 1000 };

  it("skipped (locked): exit 14, the skipped series, no success series (the failing alert stays quiet)", async () => {
    const text = await driftExposition({ ...report, failure: "locked" }, "locked", timing);
    expect(exitCodeOfOutcome("locked")).toBe(14);
    expect(text).toContain('gpuhost_drift_check_skipped{stack="prod",reason="locked"} 1\n');
    expect(text).not.toMatch(/^gpuhost_drift_check_success\{/m);
    expect(text).not.toMatch(/^gpuhost_drift_check_failure_reason\{/m);
    expect(text).toContain('gpuhost_drift_check_timestamp_seconds{stack="prod"} 1796378400\n');
  });

  it("paused: exit 17, the paused series with its reason", async () => {
    const text = await driftExposition({ ...report, failure: "paused" }, "paused", timing);
    expect(exitCodeOfOutcome("paused")).toBe(17);
    expect(text).toContain('gpuhost_drift_check_paused{stack="prod",reason="failed-update"} 1\n');
    expect(text).not.toMatch(/^gpuhost_drift_check_success\{/m);
  });

  it("--repair held for the same drift; --repair that ran and failed", async () => {
    const held = await driftExposition(report, "drift", timing, { ran: false, held: "same-drift", today: 1, limit: 1 });
    expect(held).toContain('gpuhost_drift_repair_ran{stack="prod"} 0\n');
    expect(held).toContain('gpuhost_drift_repair_held{stack="prod",reason="same-drift"} 1\n');
    expect(held).toContain('gpuhost_drift_repairs_today{stack="prod"} 1\n');
    expect(held).toContain('gpuhost_drift_repair_limit{stack="prod"} 1\n');
    expect(held).not.toMatch(/^gpuhost_drift_repair_success\{/m);
    const ran = await driftExposition(report, "paused", timing, { ran: true, updateExit: 255, today: 1, limit: 2 });
    expect(ran).toContain('gpuhost_drift_repair_ran{stack="prod"} 1\n');
    expect(ran).toContain('gpuhost_drift_repair_success{stack="prod"} 0\n');
    expect(ran).not.toMatch(/^gpuhost_drift_repair_held\{/m);
  });
});
