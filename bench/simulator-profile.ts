import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parse, stringify } from "yaml";

/** A shipped simulator profile with fields replaced, written to a temporary file for a bench run. */
export function derivedProfileFile(base: string, patch: (p: Record<string, any>) => void): string {
  const raw = parse(fs.readFileSync(path.join(__dirname, "..", "simulator", "profiles", `${base}.yaml`), "utf8"));
  patch(raw);
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-bench-")), `${base}-bench.yaml`);
  fs.writeFileSync(file, stringify(raw));
  return file;
}
