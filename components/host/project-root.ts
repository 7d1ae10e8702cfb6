// The gpuhost project root: the folder holding Pulumi.yaml above this file, whether it runs from the
// sources (components/host) or the build (dist/components/host). Host scripts are named relative to
// it, and dynamic providers load compiled code from its dist/. No imports beyond node's own, so the
// engine runner and the providers can use it too.
import * as fs from "node:fs";
import * as path from "node:path";

export function projectRoot(): string {
  let dir = __dirname;
  while (!fs.existsSync(path.join(dir, "Pulumi.yaml"))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`no Pulumi.yaml above ${__dirname}`);
    dir = parent;
  }
  return dir;
}
