import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parse, stringify } from "yaml";
import type { z } from "zod";
import type { profileSchema } from "../simulator/profile";

/** A profile's YAML as written (before defaults and `extends`). */
export type ProfileYaml = z.input<typeof profileSchema>;

/** A shipped simulator profile with fields replaced, written to a temporary file for a bench run. */
export function derivedProfileFile(base: string, patch: (p: ProfileYaml) => void): string {
  const raw = parse(
    fs.readFileSync(path.join(__dirname, "..", "simulator", "profiles", `${base}.yaml`), "utf8"),
  ) as ProfileYaml;
  patch(raw);
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-bench-")), `${base}-bench.yaml`);
  fs.writeFileSync(file, stringify(raw));
  return file;
}
