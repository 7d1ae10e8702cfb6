/**
 * Starts the real simulator for gate tests, recording its log lines and standing in for the unit's
 * state the way systemd would report it: active while the process lives, failed once a fault
 * killed it with a non-zero exit.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { stringify } from "yaml";
import { parse } from "yaml";
import { readFileSync } from "node:fs";
import { startSimulator } from "../../simulator/index";

export interface SimHandle {
  url: string;
  logs: string[];
  exitCode: number | null;
  /** performance.now() of the first log line matching a pattern, or null. */
  logTime(pattern: RegExp): number | null;
  serviceState: () => Promise<{ activeState: string; restarts: number }>;
  serviceLogs: () => Promise<string>;
  close(): Promise<void>;
}

export async function startSim(
  opts: { profile?: string; faults?: string[]; timeScale?: number; port?: number; apiKey?: string } = {},
): Promise<SimHandle> {
  const logs: string[] = [];
  const times: number[] = [];
  const handle: Partial<SimHandle> & { exitCode: number | null } = { exitCode: null };
  const sim = await startSimulator({
    profile: opts.profile ?? "tiny",
    faults: opts.faults ?? [],
    port: opts.port ?? 0,
    timeScale: opts.timeScale ?? 1,
    apiKey: opts.apiKey,
    log: (line) => {
      logs.push(line);
      times.push(performance.now());
    },
    onExit: (code) => {
      handle.exitCode = code;
    },
  });
  return Object.assign(handle, {
    url: sim.url,
    logs,
    logTime(pattern: RegExp) {
      const i = logs.findIndex((l) => pattern.test(l));
      return i < 0 ? null : times[i];
    },
    serviceState: async () => ({
      activeState: handle.exitCode === null ? "active" : handle.exitCode === 0 ? "inactive" : "failed",
      restarts: 0,
    }),
    serviceLogs: async () => logs.slice(-50).join("\n"),
    close: () => sim.close(),
  });
}

/** A profile file: tiny with changes (fault settings, load time), for faults whose defaults don't fit a test. */
export function tinyVariant(changes: Record<string, unknown>): string {
  return profileVariant("tiny", changes);
}

/** A profile file: a shipped profile with top-level sections replaced. */
export function profileVariant(name: string, changes: Record<string, unknown>): string {
  const base = parse(readFileSync(path.join(__dirname, `../../simulator/profiles/${name}.yaml`), "utf8")) as Record<
    string,
    unknown
  >;
  const dir = mkdtempSync(path.join(tmpdir(), "gpuhost-gate-profile-"));
  const file = path.join(dir, `${name}-variant.yaml`);
  writeFileSync(file, stringify({ ...base, ...changes }));
  return file;
}
