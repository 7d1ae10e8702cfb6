#!/usr/bin/env node
/**
 * `gpuhost <command>`: one entry for every tool that works outside `pulumi up`. Each command (one
 * file in cli/) declares its flags in one table (cli/options.ts parses argv by it and makes --help
 * from it) and calls a library (the simulator, the gate, the toolkit checks, the drift report); this
 * file only dispatches, loading a command's module when it is called so `gpuhost sim` starts fast.
 *
 * Exit statuses, the same in every command (each --help lists those it uses, in its own words):
 *   0    ok: ready, healthy, clean, measured
 *   1    the verdict is no (not ready, problems, drift, nothing measured), or an unexpected error;
 *        also a Node.js older than the one package.json requires
 *   2    usage: a bad command line, said in one sentence naming the flag (drift: also a host that
 *        could not be probed or an engine that failed, so cron tells drift from breakage)
 *   3    bench: a sweep level broke the error budget (its figures are excluded)
 *   4    bench: the deadline cut the run
 *   130  interrupted by SIGINT or SIGTERM (what gpuhost started is stopped first; a second
 *        interrupt exits at once)
 */
type Main = (argv: string[]) => Promise<number>;

/** package.json's engines.node; an older Node.js fails in ways that say nothing about the cause. */
const MIN_NODE_MAJOR = 22;

/** One sentence when this Node.js is older than package.json allows, else undefined. */
export function unsupportedNode(version: string = process.versions.node): string | undefined {
  const major = Number(version.split(".")[0]);
  return major >= MIN_NODE_MAJOR
    ? undefined
    : `gpuhost needs Node.js ${MIN_NODE_MAJOR} or newer (package.json "engines"), and this is Node.js ${version} (${process.execPath}): run it with a newer node, e.g. through \`npm run gpuhost -- ...\`, which finds one.\n`;
}

// `await import()` compiles to a require() at call time (CommonJS): typed, and still lazy.
export const COMMANDS: Record<string, { summary: string; load: () => Promise<Main> }> = {
  sim: {
    summary: "serve the SGLang simulator (--profile, --fault, --port, --time-scale, --list)",
    load: async () => (await import("./sim")).simMain,
  },
  verify: {
    summary: "readiness gate against an endpoint: exit 0 only when it really generates",
    load: async () => (await import("./verify")).verifyMain,
  },
  bench: {
    summary: "benchmark an endpoint: single requests and a concurrency sweep",
    load: async () => (await import("./bench")).benchMain,
  },
  compare: {
    summary: "measure each service of a host (autoregressive, EAGLE-3, DFlash) and say which to run",
    load: async () => (await import("./compare")).compareMain,
  },
  plan: {
    summary: "capacity plan: days and hosts for N completions of T tokens",
    load: async () => (await import("./plan")).planMain,
  },
  job: {
    summary: "run an OpenAI batch file on the stack, resumable, live against the plan (--input, --output)",
    load: async () => (await import("./job")).jobMain,
  },
  doctor: {
    summary: "check the local CUDA toolkit the way FlashInfer finds it",
    load: async () => (await import("./doctor")).doctorMain,
  },
  drift: {
    summary: "report drift of the hosts' toolkit state (pulumi refresh, read-only)",
    load: async () => (await import("./drift")).driftMain,
  },
  "config-doc": {
    summary: "print (or --write) docs/configuration.md, rendered from the stack-config schema",
    load: async () => (await import("./config-doc")).configDocMain,
  },
};

function usage(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((c) => c.length));
  const lines = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return `usage: gpuhost <command> [options]\n\ncommands:\n${lines.join("\n")}\n\n'gpuhost <command> --help' for a command's options.\nexit status: 0 ok; 1 the verdict is no, or an error; 2 usage; 3-4 bench's partial results; 130 interrupted\n`;
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === "--help" || name === "-h" || name === "help") {
    process.stdout.write(usage());
    return name ? 0 : 2;
  }
  const command = COMMANDS[name];
  if (!command) {
    process.stderr.write(`gpuhost: unknown command '${name}'\n\n${usage()}`);
    return 2;
  }
  return (await command.load())(rest);
}

if (require.main === module) {
  const tooOld = unsupportedNode();
  if (tooOld) {
    process.stderr.write(tooOld);
    process.exit(1);
  }
  main(process.argv.slice(2)).then(
    (code) => {
      // Interrupted: nothing the command started is left (its grace is over); end now, whatever
      // handle is still open.
      if (code === 130) process.exit(code);
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`gpuhost: ${(err as Error)?.message ?? err}\n`);
      process.exitCode = 2;
    },
  );
}
