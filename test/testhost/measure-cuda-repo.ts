/**
 * Measures what NVIDIA's CUDA files cost the test host's first run: downloading the pinned wheels
 * into an empty wheel cache, building the .debs from them into an empty package cache, and the
 * cached lookups a warm run makes. Both caches are temporary folders; the machine's are untouched.
 * Figures go in test/testhost/README.md.
 *   npx tsx test/testhost/measure-cuda-repo.ts
 */
import { promises as fs } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { wheels } from "../../components/cuda-catalog/catalog";
import { buildToolkitDebs } from "./apt-repo";
import { fetchWheels } from "./cuda-wheels";

async function timed<T>(what: string, fn: () => Promise<T>): Promise<T> {
  const t0 = Date.now();
  const result = await fn();
  console.log(`${what}: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  return result;
}

async function main(): Promise<void> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), "gpuhost-measure-cuda-"));
  const wheelDir = path.join(root, "wheels");
  process.env.GPUHOST_CUDA_WHEEL_CACHE = wheelDir;
  try {
    await timed(`download ${wheels().length} wheels into an empty cache`, () => fetchWheels(wheels(), wheelDir));
    let size = 0;
    for (const f of await fs.readdir(wheelDir)) size += (await fs.stat(path.join(wheelDir, f))).size;
    console.log(`  wheels: ${(size / 1e6).toFixed(0)} MB`);
    await timed("cached wheels, hashes checked", () => fetchWheels(wheels(), wheelDir));
    const debs = await timed("build the .debs from cached wheels", () => buildToolkitDebs(path.join(root, "apt")));
    let debSize = 0;
    for (const f of await fs.readdir(debs.debDir)) debSize += (await fs.stat(path.join(debs.debDir, f))).size;
    console.log(`  .debs: ${(debSize / 1e6).toFixed(0)} MB`);
    await timed("cached .debs", () => buildToolkitDebs(path.join(root, "apt")));
  } finally {
    await fs.rm(root, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
