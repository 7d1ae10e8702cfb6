// Host commands are spawned `detached`, each the leader of its own process group, so that a timeout
// stops everything the command started (a ProxyCommand's ssh, a script's children), not only its
// shell. No Pulumi import: exec.ts, the host-key probe and the offline command provider share it.
import type { ChildProcess } from "node:child_process";

/** SIGKILL the process group `child` leads; where the group is gone or was never made, the child alone. */
export function killProcessGroup(child: ChildProcess): void {
  try {
    process.kill(-child.pid!, "SIGKILL");
  } catch {
    child.kill("SIGKILL");
  }
}
