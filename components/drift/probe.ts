// Runs scripts/probe.sh on a host in ONE exec (one SSH round trip) and parses its JSON.
// No Pulumi import: provider-impl.ts loads this from dist/ at call time.
import * as fs from "node:fs";
import { projectFile } from "../../project-files";
import type { HostConnection } from "../host/connection";
import { execOnHost } from "../host/exec";
import { type ExpectedState, type ObservedState, observedStateSchema } from "./schema";

/** scripts/probe.sh, found from source (tsx/vitest) and from dist/ alike (tsc does not copy .sh files). */
export function probeScriptPath(): string {
  return projectFile("components/drift/scripts/probe.sh");
}

/** The probe's arguments: everything it looks at comes from the expected state (itself from the toolkit description). */
export function probeArgs(expected: ExpectedState): string[] {
  const args = ["--cuda-home", expected.cudaHome, "--package-suffix", expected.packageSuffix];
  if (expected.unitPath !== undefined) args.push("--path", expected.unitPath);
  if (expected.jitBase !== undefined) args.push("--jit-base", expected.jitBase);
  if (expected.venvPath !== undefined) args.push("--venv", expected.venvPath);
  for (const file of Object.keys(expected.files).sort()) args.push("--file", file);
  for (const unit of Object.keys(expected.units).sort()) args.push("--unit", unit);
  return args;
}

export class ProbeError extends Error {
  constructor(
    message: string,
    readonly stderr: string,
    /** Set when the SSH session was refused on a host key (exec.ts): the host was not probed at all. */
    readonly hostKeyRefusal?: string,
  ) {
    super(message);
    this.name = "ProbeError";
  }
}

/** Parse probe.sh's stdout; throws ProbeError naming what is wrong. */
export function parseProbeOutput(stdout: string): ObservedState {
  let json: unknown;
  try {
    json = JSON.parse(stdout);
  } catch (e) {
    throw new ProbeError(`probe printed no valid JSON (${(e as Error).message}): ${stdout.slice(0, 300)}`, "");
  }
  const result = observedStateSchema.safeParse(json);
  if (!result.success) {
    throw new ProbeError(
      `probe output has an unexpected shape: ${result.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
      "",
    );
  }
  return result.data;
}

export interface ProbeOptions {
  /** Give up after this long (default 60 s: a probe takes about a second; a dead host must not hang refresh). */
  timeoutMs?: number;
}

/** Probe the host once. Throws ProbeError when the host cannot be reached or the probe fails. */
export async function probeHost(
  connection: HostConnection,
  expected: ExpectedState,
  opts: ProbeOptions = {},
): Promise<ObservedState> {
  const script = fs.readFileSync(probeScriptPath(), "utf8");
  const result = await execOnHost(connection, script, probeArgs(expected), {
    scriptName: "probe.sh",
    timeoutMs: opts.timeoutMs ?? 60_000,
  });
  if (result.code !== 0) {
    const why = result.code === 124 ? "timed out" : `exited ${result.code}`;
    throw new ProbeError(
      `toolkit probe ${why}: ${result.stderr.trim().slice(-500)}`,
      result.stderr,
      result.hostKeyRefusal,
    );
  }
  return parseProbeOutput(result.stdout);
}
