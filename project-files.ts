// The one way gpuhost finds its own files, whether the code runs from the sources (tsx, vitest) or
// from the build (dist/...): walk up from this module until the file is there. Host scripts, unit
// templates, the CUDA catalogue, simulator profiles and the shims are found this way, and dynamic
// providers load compiled code from the root's dist/. Node's own modules only: the engine runner,
// the providers, the shims and the simulator bundle on a test host (no Pulumi.yaml there) use it.
import * as fs from "node:fs";
import * as path from "node:path";

function findUp(marker: string): string | undefined {
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    // Files only: dist/ mirrors the source folders, so a folder name would stop inside dist/.
    if (fs.statSync(path.join(dir, marker), { throwIfNoEntry: false })?.isFile()) return dir;
    if (path.dirname(dir) === dir) return undefined;
  }
}

/** The gpuhost project root: the folder holding Pulumi.yaml above this module. */
export function projectRoot(): string {
  const dir = findUp("Pulumi.yaml");
  if (dir === undefined) throw new Error(`no Pulumi.yaml above ${__dirname}`);
  return dir;
}

/**
 * The absolute path of a project file given relative to the project root (e.g.
 * "components/drift/scripts/probe.sh"), found above this module from source and from dist/ alike.
 * Name a file tsc does not emit (a script, template or data file); for a folder, take the dirname
 * of a file in it.
 */
export function projectFile(rel: string): string {
  const dir = findUp(rel);
  if (dir === undefined) throw new Error(`${rel} not found above ${__dirname}`);
  return path.join(dir, rel);
}
