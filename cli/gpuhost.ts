#!/usr/bin/env node
/**
 * `gpuhost <command>`: one entry for every tool that works outside `pulumi up`. Each command's entry
 * parses its argv and calls a library (the simulator, the gate, the toolkit checks, the drift
 * report); this file only dispatches, loading a command's module when it is called so `gpuhost sim`
 * starts fast.
 */
type Main = (argv: string[]) => Promise<number>;

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
    load: async () => (await import("./verify")).benchMain,
  },
  compare: {
    summary: "measure each service of a host (autoregressive, EAGLE-3, DFlash) and say which to run",
    load: async () => (await import("./compare")).compareMain,
  },
  plan: {
    summary: "capacity plan: days and hosts for N completions of T tokens",
    load: async () => (await import("./verify")).planMain,
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
  return `usage: gpuhost <command> [options]\n\ncommands:\n${lines.join("\n")}\n\n'gpuhost <command> --help' for a command's options.\n`;
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
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`gpuhost: ${(err as Error)?.message ?? err}\n`);
      process.exitCode = 2;
    },
  );
}
