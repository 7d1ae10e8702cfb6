// Runs systemd's own unit loader (`systemd-analyze verify`) over rendered units in a throw-away
// root: the host's unit library copied in, each ExecStart program stubbed, so that verify really
// checks (unknown directives, bad values, a missing program) instead of stopping at missing targets.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { run } from "../support/run";

export function systemdAnalyzeAvailable(): boolean {
  return spawnSync("systemd-analyze", ["--version"]).status === 0;
}

export interface VerifyResult {
  status: number | null;
  stderr: string;
  /** The ExecStart argv as systemd parsed it (from its debug dump), per unit. */
  argv: string[];
  /** Environment= assignments as systemd parsed them. */
  environment: string[];
}

/** Splits systemd's "Command Line:" dump (words, double-quoted with C escapes where needed). */
export function splitDumpedCommandLine(line: string): string[] {
  const words: string[] = [];
  let i = 0;
  while (i < line.length) {
    if (line[i] === " ") {
      i++;
      continue;
    }
    let word = "";
    if (line[i] === '"') {
      i++;
      while (i < line.length && line[i] !== '"') {
        if (line[i] === "\\") {
          const n = line[i + 1];
          word += n === "n" ? "\n" : n === "t" ? "\t" : n;
          i += 2;
        } else word += line[i++];
      }
      i++;
    } else {
      while (i < line.length && line[i] !== " ") word += line[i++];
    }
    words.push(word);
  }
  return words;
}

/** Async: two systemd-analyze runs and a copy of the unit library take seconds under load. */
export async function verifyUnit(
  name: string,
  content: string,
  opts: {
    stubProgram?: boolean;
    /** Other units written beside it (a timer's service). */ with?: Record<string, string>;
  } = {},
): Promise<VerifyResult> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-units-"));
  try {
    await fs.promises.cp("/usr/lib/systemd/system", path.join(root, "usr/lib/systemd/system"), {
      recursive: true,
      verbatimSymlinks: true,
    });
    fs.mkdirSync(path.join(root, "etc/systemd/system"), { recursive: true });
    for (const [file, text] of Object.entries({ ...opts.with, [name]: content })) {
      fs.writeFileSync(path.join(root, "etc/systemd/system", file), text);
      // The program as systemd reads it: a quoted path (with spaces) is one word.
      const line = /^ExecStart=(.*)$/m.exec(text)?.[1];
      const program = line === undefined ? undefined : splitDumpedCommandLine(line)[0];
      if (program && opts.stubProgram !== false) {
        fs.mkdirSync(path.join(root, path.dirname(program)), { recursive: true });
        fs.writeFileSync(path.join(root, program), "#!/bin/sh\n", { mode: 0o755 });
      }
    }
    const plain = await run("systemd-analyze", ["verify", "--man=no", `--root=${root}`, name], { timeout: 120_000 });
    const debug = await run("systemd-analyze", ["verify", "--man=no", `--root=${root}`, name], {
      env: { ...process.env, SYSTEMD_LOG_LEVEL: "debug" },
      timeout: 120_000,
    });
    const dump = debug.stderr + debug.stdout;
    const line = /-> ExecStart:\n\s*Command Line: (.*)\n/.exec(dump)?.[1] ?? "";
    const environment = [...dump.matchAll(/^\s*Environment: (.*)$/gm)].map((m) => m[1]);
    return { status: plain.status, stderr: plain.stderr, argv: splitDumpedCommandLine(line), environment };
  } finally {
    await fs.promises.rm(root, { recursive: true, force: true });
  }
}
