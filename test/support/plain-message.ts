/**
 * What a refusal or a config error must look like to the person running gpuhost: one line of one or
 * two plain sentences, without colour codes, stack frames, the SDK's "unhandled exception" preamble,
 * its property path, or OpenSSH's banner.
 */
import { expect } from "vitest";

/** The sentences of `line` (a sentence ends with . ! or ? before a space and a capital letter). */
export function sentencesOf(line: string): string[] {
  return line.split(/(?<=[.!?])\s+(?=[A-Z])/).filter((s) => s.trim() !== "");
}

export function expectPlainSentences(line: string): void {
  expect(line).not.toContain("\u001b[");
  expect(line).not.toMatch(/^\s+at /m);
  expect(line).not.toContain("\n");
  for (const fragment of ["unhandled exception", "error serializing property", "<ref *", "@@@", "remove with:"])
    expect(line).not.toContain(fragment);
  const n = sentencesOf(line).length;
  expect(n, line).toBeGreaterThanOrEqual(1);
  expect(n, line).toBeLessThanOrEqual(2);
}

/** The `error:` lines of a pulumi run's output (its Diagnostics), without the prefix and indentation. */
export function errorLines(output: string): string[] {
  return output
    .split("\n")
    .map((l) => /^\s+error: (.*)$/.exec(l)?.[1])
    .filter((l): l is string => l !== undefined);
}
