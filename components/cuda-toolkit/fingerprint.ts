// The toolkit fingerprint: one short hash of the toolkit release and every installed package
// version. FlashInfer's JIT cache is keyed by it (a changed toolkit never reuses stale kernels),
// and the drift probe compares it. verify.sh computes the same value on the host.
import * as crypto from "node:crypto";

/** sha256 over "cuda-<release>" and the sorted "<package> <version>" lines; first 16 hex digits. */
export function toolkitFingerprint(release: string, versions: Readonly<Record<string, string>>): string {
  const lines = Object.entries(versions)
    .map(([p, v]) => `${p} ${v}`)
    .sort();
  return crypto
    .createHash("sha256")
    .update(`cuda-${release}\n${lines.join("\n")}\n`)
    .digest("hex")
    .slice(0, 16);
}

/** Parse verify.sh's `packages=a 1,b 2` line into { a: "1", b: "2" }. */
export function parsePackageVersions(line: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of line.split(",").filter(Boolean)) {
    const [name, version] = item.split(" ");
    if (name && version) out[name] = version;
  }
  return out;
}
