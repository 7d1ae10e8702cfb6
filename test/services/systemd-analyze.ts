// Runs systemd's own unit loader (`systemd-analyze verify`) over rendered units in a throw-away
// root: the host's unit library copied in, each ExecStart program stubbed, so that verify really
// checks (unknown directives, bad values, a missing program) instead of stopping at missing targets.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

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

export function verifyUnit(name: string, content: string, opts: { stubProgram?: boolean } = {}): VerifyResult {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-units-"));
  try {
    fs.cpSync("/usr/lib/systemd/system", path.join(root, "usr/lib/systemd/system"), {
      recursive: true,
      verbatimSymlinks: true,
    });
    fs.mkdirSync(path.join(root, "etc/systemd/system"), { recursive: true });
    fs.writeFileSync(path.join(root, "etc/systemd/system", name), content);
    const program = /^ExecStart=(\S+)/m.exec(content)?.[1];
    if (program && opts.stubProgram !== false) {
      fs.mkdirSync(path.join(root, path.dirname(program)), { recursive: true });
      fs.writeFileSync(path.join(root, program), "#!/bin/sh\n", { mode: 0o755 });
    }
    const plain = spawnSync("systemd-analyze", ["verify", "--man=no", `--root=${root}`, name], { encoding: "utf8" });
    const debug = spawnSync("systemd-analyze", ["verify", "--man=no", `--root=${root}`, name], {
      encoding: "utf8",
      env: { ...process.env, SYSTEMD_LOG_LEVEL: "debug" },
      maxBuffer: 64 * 1024 * 1024,
    });
    const dump = debug.stderr + debug.stdout;
    const line = /-> ExecStart:\n\s*Command Line: (.*)\n/.exec(dump)?.[1] ?? "";
    const environment = [...dump.matchAll(/^\s*Environment: (.*)$/gm)].map((m) => m[1]);
    return { status: plain.status, stderr: plain.stderr, argv: splitDumpedCommandLine(line), environment };
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
}
