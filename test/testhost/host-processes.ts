/**
 * The processes a test host runs for SSH sessions: what gpuhost's host scripts (and what they started)
 * are while they run, and what they would leave behind. The host runs no logind, so systemd keeps
 * everything sshd starts in ssh.service's cgroup; sshd's own processes and the listing's own
 * session are left out.
 */
import type { TestHost } from "./harness";

// Bash on the host: each /proc entry's session is the 4th field after the command name in its stat.
const LIST = `me=$(</proc/self/stat); me=\${me##*) }; set -- $me; me=$4
for d in /proc/[0-9]*; do
  grep -qs '/system.slice/ssh.service$' "$d/cgroup" || continue
  [ "$(cat "$d/comm" 2>/dev/null)" = sshd ] && continue
  st=$(cat "$d/stat" 2>/dev/null) || continue
  st=\${st##*) }; set -- $st
  [ "$4" = "$me" ] && continue
  printf '%s %s\\n' "\${d#/proc/}" "$(tr '\\0\\n' '  ' <"$d/cmdline" 2>/dev/null)"
done`;

/** The processes of SSH sessions other than this listing's, as pid -> command line. */
export async function hostSessionProcesses(host: TestHost): Promise<Map<number, string>> {
  const r = await host.execOk(LIST, { timeoutMs: 30_000 });
  const found = new Map<number, string>();
  for (const line of r.stdout.split("\n").filter(Boolean)) {
    const at = line.indexOf(" ");
    found.set(Number(line.slice(0, at)), line.slice(at + 1).trim());
  }
  return found;
}

/** What SSH sessions still run on the host after up to SECONDS, as "pid command line" (none: []). */
export async function hostLeftBehind(host: TestHost, seconds: number): Promise<string[]> {
  const deadline = Date.now() + seconds * 1000;
  let left = await hostSessionProcesses(host);
  while (left.size > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 500));
    left = await hostSessionProcesses(host);
  }
  return [...left].map(([pid, cmd]) => `${pid} ${cmd}`);
}
