// Reads a committed stack file the way Pulumi hands it to the program: the `gpuhost:` keys, namespace stripped.
import * as fs from "node:fs";
import * as path from "node:path";
import { parse } from "yaml";

export const ROOT = path.resolve(__dirname, "..", "..");

export function stackConfig(stack: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const doc = parse(fs.readFileSync(path.join(ROOT, "stacks", `Pulumi.${stack}.yaml`), "utf8")) as {
    config: Record<string, unknown>;
  };
  const raw: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(doc.config)) if (k.startsWith("gpuhost:")) raw[k.slice("gpuhost:".length)] = v;
  return { ...raw, ...extra };
}
