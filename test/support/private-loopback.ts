/**
 * Runs a function of a test module in a network namespace of its own, whose loopback no other
 * process uses (`unshare --net --map-root-user`, then `ip link set lo up`).
 *
 * Why: the self-connection tests (test/support/self-connect.ts) steer the kernel's choice of a
 * connection's source port, which every connect on the machine's loopback moves on. Beside a storm
 * of loopback connects (another test file's benchmark, a CI job next to this one) every round of
 * steering missed, quiet ports ran out and strangers' sockets landed on the port under test, and the
 * tests failed for a minute after the storm (reproduced: docs/development.md, fifth round). A
 * namespace of its own has its own ports, its own ephemeral range and its own /proc/net/tcp.
 *
 * Where the namespace cannot be made (no unshare or ip, user namespaces refused), the function runs
 * here, in the machine's namespace, as before: `isolated` says which it was.
 */
import { execFile, spawnSync } from "node:child_process";
import * as path from "node:path";
import { pathToFileURL } from "node:url";

const CHILD = path.join(__dirname, "private-loopback-child.ts");
/** The child prints its result after this, on a line of its own (private-loopback-child.ts). */
export const MARK = "PRIVATE-LOOPBACK-RESULT ";

let available: boolean | undefined;
let warned = false;

/** Whether this machine lets a process make a network namespace of its own with loopback up (asked once). */
export function privateLoopbackAvailable(): boolean {
  available ??=
    spawnSync("unshare", ["--net", "--map-root-user", "sh", "-c", "ip link set lo up"], {
      stdio: "ignore",
      timeout: 10_000,
    }).status === 0;
  return available;
}

/**
 * Calls export NAME of the module FILE (an absolute path to a .ts file) with ARGS (JSON values) in a
 * network namespace of its own, in a child Node process killed after TIMEOUTMS; its result must be
 * plain JSON. Falls back to calling it here when no namespace can be made.
 */
export async function inPrivateLoopback<T>(
  file: string,
  name: string,
  args: unknown[],
  timeoutMs: number,
): Promise<{ result: T; isolated: boolean }> {
  if (!privateLoopbackAvailable()) {
    if (!warned)
      process.stderr.write(
        "private-loopback: this machine refuses a network namespace (unshare --net --map-root-user, ip link set lo up): the self-connection reproductions run on its own loopback, where other processes' connects can make them fail\n",
      );
    warned = true;
    const mod = (await import(pathToFileURL(file).href)) as Record<string, (...a: unknown[]) => Promise<T>>;
    return { result: await mod[name](...args), isolated: false };
  }
  const stdout = await new Promise<string>((resolve, reject) =>
    execFile(
      "unshare",
      [
        "--net",
        "--map-root-user",
        "sh",
        "-c",
        // $0 is node; the rest its arguments, never part of the script.
        'ip link set lo up && exec "$0" "$@"',
        process.execPath,
        "--import",
        "tsx",
        CHILD,
        file,
        name,
        JSON.stringify(args),
      ],
      { cwd: path.join(__dirname, "../.."), timeout: timeoutMs, killSignal: "SIGKILL", maxBuffer: 16 << 20 },
      (err, out, errText) =>
        err ? reject(new Error(`${name} in a private network namespace: ${err.message}\n${errText}`)) : resolve(out),
    ),
  );
  const line = stdout
    .split("\n")
    .reverse()
    .find((l) => l.startsWith(MARK));
  if (line === undefined) throw new Error(`${name} in a private network namespace printed no result:\n${stdout}`);
  return { result: JSON.parse(line.slice(MARK.length)) as T, isolated: true };
}
