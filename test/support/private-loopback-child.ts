/**
 * The child of test/support/private-loopback.ts, run inside the network namespace it made:
 * `node --import tsx private-loopback-child.ts FILE NAME ARGS-JSON` calls export NAME of FILE with
 * the arguments and prints its result as JSON after a mark, on a line of its own.
 */
import { pathToFileURL } from "node:url";
import { MARK } from "./private-loopback";

async function main(): Promise<void> {
  const [file, name, args] = process.argv.slice(2);
  const mod = (await import(pathToFileURL(file).href)) as Record<string, (...a: unknown[]) => Promise<unknown>>;
  if (typeof mod[name] !== "function") throw new Error(`${file} exports no function ${name}`);
  const result = await mod[name](...(JSON.parse(args) as unknown[]));
  process.stdout.write(`\n${MARK}${JSON.stringify(result)}\n`);
}

main().then(
  // Whatever the function left open (a keep-alive agent, a timer) must not hold the result back.
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
