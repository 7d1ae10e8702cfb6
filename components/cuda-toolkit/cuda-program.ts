// What `gpuhost doctor` runs on this machine besides reading files: nvidia-smi, and CUDA programs
// compiled with the toolkit's own nvcc and run (the curand + cublas proof, the peer-to-peer test).
// One way to do each, bounded, in a folder of its own that is removed after.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

const SMI_TIMEOUT_MS = 15_000;
/** The bound on a compile: the real nvcc takes seconds, a busy 2-core host tens of them. */
const COMPILE_TIMEOUT_MS = 300_000;

/** nvidia-smi's output for ARGS; "" where there is none (no driver, no GPU) or it fails. */
export function nvidiaSmi(args: string[], env: NodeJS.ProcessEnv): string {
  try {
    return execFileSync("nvidia-smi", args, {
      encoding: "utf8",
      timeout: SMI_TIMEOUT_MS,
      env,
      stdio: ["ignore", "pipe", "ignore"],
    });
  } catch {
    return "";
  }
}

/** What a failed child process printed (stderr, then stdout), else its error's message. */
export function processOutput(err: unknown): string {
  const e = err as { stdout?: Buffer | string; stderr?: Buffer | string; message?: string };
  return `${e.stderr?.toString() ?? ""}${e.stdout?.toString() ?? ""}` || (e.message ?? String(err));
}

/** The line of a compiler's or program's output that says what went wrong, else its first. */
export function errorLine(text: string): string {
  const lines = text.split("\n").map((l) => l.trim());
  return lines.find((l) => /error|cannot find/.test(l)) ?? lines.find(Boolean) ?? "(no output)";
}

/** A program compiled: its binary, and a bounded run of it (throws as execFileSync does). */
export interface Compiled {
  compileError: null;
  binary: string;
  run: (timeoutMs: number) => string;
}

/**
 * Compiles SOURCE as NAME.cu with NVCC (and LINK_ARGS) in a fresh folder, hands THEN the result
 * (the compiler's output when it failed), and removes the folder once THEN returns. Compiled inside
 * its folder so messages name NAME.cu, as FlashInfer's would name its sources. The run finds the
 * toolkit's libraries in LIB_DIR before any other.
 */
export function withCompiled<T>(
  p: {
    nvcc: string;
    name: string;
    source: string;
    linkArgs?: string[];
    env: NodeJS.ProcessEnv;
    libDir: string | null;
  },
  then: (c: { compileError: string } | Compiled) => T,
): T {
  // nvcc calls the host compiler (gcc) by PATH: the system folders stay reachable whatever PATH is.
  const env = { ...p.env, PATH: [p.env.PATH, "/usr/local/bin:/usr/bin:/bin"].filter(Boolean).join(":") };
  const work = fs.mkdtempSync(path.join(os.tmpdir(), `gpuhost-${p.name}-`));
  try {
    fs.writeFileSync(path.join(work, `${p.name}.cu`), p.source);
    try {
      execFileSync(p.nvcc, ["-o", p.name, `${p.name}.cu`, ...(p.linkArgs ?? [])], {
        cwd: work,
        encoding: "utf8",
        timeout: COMPILE_TIMEOUT_MS,
        stdio: ["ignore", "pipe", "pipe"],
        env,
      });
    } catch (err) {
      return then({ compileError: processOutput(err) });
    }
    const binary = path.join(work, p.name);
    const runEnv = { ...env, LD_LIBRARY_PATH: [p.libDir, p.env.LD_LIBRARY_PATH].filter(Boolean).join(":") };
    return then({
      compileError: null,
      binary,
      run: (timeoutMs) =>
        execFileSync(binary, [], {
          encoding: "utf8",
          timeout: timeoutMs,
          stdio: ["ignore", "pipe", "pipe"],
          env: runEnv,
        }),
    });
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}
