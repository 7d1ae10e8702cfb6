/**
 * What the program's pending-operations check (stack/pending-operations.ts) adds to a no-op `pulumi
 * up`, measured on a throwaway sim stack under the real engine: the program blocks while it reads
 * the stack's state (its state file on a file backend, else `pulumi stack export`) before registering any resource, and the engine has
 * nothing else to do meanwhile (the refresh is done), so the check's own duration, which the program
 * logs at debug level, is what the update waits. Printed beside the no-op up's whole wall time.
 *
 *   npx tsc -p . && npx tsx bench/pending-check.ts [--runs 5]
 */
import * as crypto from "node:crypto";
import { parseArgs } from "node:util";
import { percentile } from "../gate/judge/stats";
import { freeLocalPort } from "../ports";
import { createTestStack, simHostNamed } from "../test/support/stack";

function stats(xs: number[]): string {
  const s = Float64Array.from(xs).sort();
  return `median ${percentile(s, 50)!.toFixed(2)} s, max ${s[s.length - 1].toFixed(2)} s (n=${xs.length})`;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { runs: { type: "string", default: "5" } } });
  const runs = Number(values.runs);
  const host = `pc-${crypto.randomBytes(3).toString("hex")}`;
  const s = await createTestStack("sim", [
    ...simHostNamed(host),
    { path: "gpuhost:services.port", value: String(await freeLocalPort()) },
  ]);
  try {
    await s.ok("up", "--yes", "--skip-preview");
    const checks: number[] = [];
    const ups: number[] = [];
    let source = "";
    for (let i = 0; i < runs; i++) {
      // --debug shows the program's debug line with the check's duration.
      const debug = await s.ok("up", "--yes", "--skip-preview", "--debug");
      const m = /pending operations read from (.+?) in ([\d.]+) s/.exec(debug.stdout);
      if (!m) throw new Error(`no check in the up's debug output:\n${debug.stdout.slice(-3000)}`);
      source = m[1];
      checks.push(Number(m[2]));
      const started = performance.now();
      const plain = await s.ok("up", "--yes", "--skip-preview");
      ups.push((performance.now() - started) / 1000);
      if (/created|updated|replaced|deleted/.test(plain.stdout.slice(plain.stdout.lastIndexOf("Resources:"))))
        throw new Error(`the up was not a no-op:\n${plain.stdout}`);
    }
    console.log(`pending-operations check in a no-op up (read from ${source}): ${stats(checks)}`);
    console.log(`no-op up, whole: ${stats(ups)}`);
  } finally {
    await s.dispose();
  }
}

void main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
