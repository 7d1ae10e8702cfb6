// Shell quoting with hostile values: each must arrive as exactly one argument, unchanged, and
// nothing in it may run. Checked by running the quoted words through a real /bin/sh.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { envAssignments, shellJoin, shellQuote } from "../../components/host/quote";

const canary = path.join(os.tmpdir(), `gpuhost-pwned-${process.pid}`);
const hostile = [
  `x; touch ${canary}`,
  `$(touch ${canary})`,
  `\`touch ${canary}\``,
  "a user name with spaces",
  "it's",
  `'"'"'`,
  "line1\nline2; touch " + canary,
  "${HOME}",
  "-n",
  "",
  "\\",
  "a|b&c>d<e*?[x]~!#",
  "ünïcødé ✓",
];

/** What /bin/sh makes of a command line: each argument as JSON. */
function argvOf(line: string): string[] {
  const out = execFileSync("/bin/sh", ["-c", `${line}`], { encoding: "utf8" });
  return JSON.parse(out) as string[];
}
const printer = `node -e 'console.log(JSON.stringify(process.argv.slice(1)))' --`;

describe("shellQuote", () => {
  it("every hostile value reaches the program as one unchanged argument, and nothing runs", () => {
    fs.rmSync(canary, { force: true });
    expect(argvOf(`${printer} ${shellJoin(hostile)}`)).toEqual(hostile);
    expect(fs.existsSync(canary)).toBe(false);
  });

  it("leaves plain words readable and quotes everything else", () => {
    expect(shellQuote("/usr/local/cuda-13.0")).toBe("/usr/local/cuda-13.0");
    expect(shellQuote("--release")).toBe("--release");
    expect(shellQuote("a b")).toBe("'a b'");
    expect(shellQuote("it's")).toBe(`'it'\\''s'`);
    expect(shellQuote("")).toBe("''");
  });

  it("rejects NUL bytes, which no shell word can carry", () => {
    expect(() => shellQuote("a\0b")).toThrow(/NUL/);
  });

  it("environment assignments quote values and reject unsafe names", () => {
    fs.rmSync(canary, { force: true });
    const env = envAssignments({ B: `$(touch ${canary})`, A: "x y" });
    expect(env).toEqual(["A='x y'", `B='$(touch ${canary})'`]);
    expect(execFileSync("/bin/sh", ["-c", `env ${env.join(" ")} sh -c 'printf %s "$B"'`], { encoding: "utf8" })).toBe(
      `$(touch ${canary})`,
    );
    expect(fs.existsSync(canary)).toBe(false);
    expect(() => envAssignments({ "X; rm -rf /": "1" })).toThrow(/invalid environment variable name/);
    expect(() => envAssignments({ "A=B": "1" })).toThrow(/invalid environment variable name/);
  });
});
