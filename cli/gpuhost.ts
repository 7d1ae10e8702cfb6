#!/usr/bin/env node
/**
 * `gpuhost <command>`: one entry for every tool that works outside `pulumi up`. Each command's entry
 * parses its argv and calls a library (the simulator, the gate, the toolkit checks, the drift
 * report); this file only dispatches, loading a command's module when it is called so `gpuhost sim`
 * starts fast.
 */
type Main = (argv: string[]) => Promise<number>;

export const COMMANDS: Record<string, { summary: string; load: () => Main }> = {
  sim: {
    summary: "serve the SGLang simulator (--profile, --fault, --port, --time-scale, --list)",
    load: () => require("../simulator/cli").simMain,
  },
  verify: {
    summary: "readiness gate against an endpoint: exit 0 only when it really generates",
    load: () => require("../gate/cli").verifyMain,
  },
  bench: {
    summary: "benchmark an endpoint: single requests and a concurrency sweep",
    load: () => require("../gate/cli").benchMain,
  },
  compare: {
    summary: "measure each service of a host (autoregressive, EAGLE-3, DFlash) and say which to run",
    load: () => require("../gate/compare-cli").compareMain,
  },
  plan: {
    summary: "capacity plan: days and hosts for N completions of T tokens",
    load: () => require("../gate/cli").planMain,
  },
  doctor: {
    summary: "check the local CUDA toolkit the way FlashInfer finds it",
    load: () => require("./doctor").doctorMain,
  },
  drift: {
    summary: "report drift of the hosts' toolkit state (pulumi refresh, read-only)",
    load: () => require("./drift").driftMain,
  },
  "config-doc": {
    summary: "print (or --write) docs/configuration.md, rendered from the stack-config schema",
    load: () => require("./config-doc").configDocMain,
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
  return command.load()(rest);
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
