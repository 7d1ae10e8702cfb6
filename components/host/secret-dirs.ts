// Temporary folders that hold secrets (the SSH private key, known_hosts) for one command or tunnel.
// Each caller removes its folder when done; the registry removes whatever is still there when the
// process exits by any path Node sees (normal end, process.exit from the provider's process guard
// after the engine went away or on SIGTERM), so a key never stays behind in the temporary folder.
// No Pulumi import: loaded by path from the compiled provider.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

const live = new Set<string>();
let hooked = false;

function removeAll(): void {
  for (const dir of live) fs.rmSync(dir, { recursive: true, force: true });
  live.clear();
}

/** A fresh 0700 folder under the system temporary folder, removed at the latest when the process exits. */
export function secretTempDir(prefix: string): { dir: string; remove(): void } {
  if (!hooked) {
    process.on("exit", removeAll);
    hooked = true;
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  live.add(dir);
  return {
    dir,
    remove() {
      fs.rmSync(dir, { recursive: true, force: true });
      live.delete(dir);
    },
  };
}

/** The folders not yet removed (for tests). */
export function liveSecretDirs(): string[] {
  return [...live];
}
