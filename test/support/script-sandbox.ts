import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

/**
 * Where a test runs a host script on a simulated root: the root, a folder of stub tools the test puts
 * first on PATH, and the path a command injected through an argument would create (it must not exist).
 */
export interface ScriptSandbox {
  root: string;
  stubs: string;
  marker: string;
}

/** A fresh sandbox (the marker path is named, not created). */
export function scriptSandbox(): ScriptSandbox {
  return {
    root: fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-sim-")),
    stubs: fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-stubs-")),
    marker: path.join(os.tmpdir(), `gpuhost-pwned-${process.pid}-${Date.now()}`),
  };
}

/** Removes what the sandbox's script left: the root, the stubs and any marker. */
export function removeSandbox(box: ScriptSandbox): void {
  for (const d of [box.root, box.stubs, box.marker]) fs.rmSync(d, { recursive: true, force: true });
}
