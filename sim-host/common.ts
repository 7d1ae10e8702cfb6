// Shared by the simulated host's shims. The root folder comes from GPUHOST_ROOT and must be set:
// a shim never touches the machine's real /.
// Kept free of other project imports (yaml, zod): every apt-get/systemctl call starts a Node
// process, and the shims should start as fast as plain Node does.
import * as fs from "node:fs";
import * as path from "node:path";
import { projectFile } from "../project-files";

export function root(): string {
  const r = process.env.GPUHOST_ROOT;
  if (!r || path.resolve(r) === "/") {
    console.error("gpuhost simulated host: GPUHOST_ROOT must name the simulated root folder (refusing the real /)");
    process.exit(2);
  }
  // "." is the supervisor of a started unit, which runs inside the root: asked anew each time (the
  // kernel's realpath, since Node caches process.cwd()), the root follows the folder when the
  // checkout holding it is moved while services run, as a VM's services survive its disk moving.
  return r === "." ? fs.realpathSync.native(".") : path.resolve(r);
}

/** The real path of a host path on the simulated host. */
export function hostPath(p: string): string {
  return path.join(root(), p);
}

/** The host path of a real path under the root (inverse of hostPath). */
export function fromHostPath(real: string): string {
  const r = root();
  return real === r ? "/" : real.startsWith(`${r}/`) ? real.slice(r.length) : real;
}

export function fail(message: string, code: number): never {
  console.error(message);
  process.exit(code);
}

/** The text of a thrown value, as the shims print it: its message when it has one. */
export function errorText(e: unknown): string {
  const message: unknown = typeof e === "object" && e !== null && "message" in e ? e.message : undefined;
  return String(message ?? e);
}

/**
 * The folder of shim wrappers (sim-host/bin). The compiled shims run from dist/sim-host, and tsc
 * copies no bash files there: the project-file helper finds the source tree.
 */
export function shimDir(): string {
  try {
    return path.dirname(projectFile("sim-host/bin/systemctl"));
  } catch (e) {
    return fail(`gpuhost simulated host: ${errorText(e)}`, 2);
  }
}

/** A Debian control/status stanza: `Key: value` fields; parseStanzas keeps only those with a Package. */
export type Stanza = Record<string, string> & { Package: string };

/** Debian control/status stanzas (Key: value, blank-line separated). */
export function parseStanzas(text: string): Stanza[] {
  return text
    .split(/\n\s*\n/)
    .map((block) => {
      const s: Record<string, string> = {};
      for (const line of block.split("\n")) {
        const m = /^([A-Za-z0-9-]+):\s*(.*)$/.exec(line);
        if (m) s[m[1]] = m[2];
      }
      return s;
    })
    .filter((s): s is Stanza => Boolean(s.Package));
}

export function stanzaText(s: Record<string, string>): string {
  return `${Object.entries(s)
    .map(([k, v]) => `${k}: ${v}`)
    .join("\n")}\n`;
}
