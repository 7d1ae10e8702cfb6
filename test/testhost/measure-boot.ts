/**
 * Measures the test host's two costs: the first run (debootstrap + cache tarball, into a fresh
 * cache folder) and a cached boot (its root an overlay of the cached tree, extracted once; nspawn boot until SSH answers and systemd settles),
 * plus teardown. Figures go in test/testhost/README.md.
 *   npx tsx test/testhost/measure-boot.ts [--cold] [--boots N]
 */
import { promises as fs } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { bootTestHost } from "./harness";
import { ensureRootfsTarball } from "./rootfs";

async function main(argv: string[]): Promise<void> {
  const cold = argv.includes("--cold");
  const boots = Number(argv[argv.indexOf("--boots") + 1] ?? 3) || 3;
  let cacheDir: string | undefined;
  if (cold) {
    cacheDir = await fs.mkdtemp(path.join(os.tmpdir(), "gpuhost-measure-cache-"));
    const report = await ensureRootfsTarball({ cacheDir });
    const size = (await fs.stat(report.tarball)).size;
    console.log(
      `first run (debootstrap + tarball): ${report.seconds.toFixed(1)} s, tarball ${(size / 1e6).toFixed(0)} MB`,
    );
  }
  for (let i = 0; i < boots; i++) {
    const t0 = Date.now();
    const host = await bootTestHost({ name: "measure", recipe: cacheDir ? { cacheDir } : undefined });
    const booted = (Date.now() - t0) / 1000;
    const t1 = Date.now();
    await host.stop();
    const t = host.timings;
    console.log(
      `cached boot ${i + 1}: ${booted.toFixed(1)} s to SSH + settled systemd ` +
        `(root ${t.rootSeconds.toFixed(1)} s, until SSH ${t.sshSeconds.toFixed(1)} s, until settled ${t.settledSeconds.toFixed(1)} s); ` +
        `teardown ${((Date.now() - t1) / 1000).toFixed(1)} s`,
    );
  }
  if (cacheDir) await fs.rm(cacheDir, { recursive: true, force: true });
}

main(process.argv.slice(2)).catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
