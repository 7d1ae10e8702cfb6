/**
 * What the stack config refuses in RAW, as `path: message` lines (what `pulumi preview` prints as a
 * ConfigError); fails the test when RAW is accepted.
 */
import { expect } from "vitest";
import { ConfigError, parseConfig } from "../../stack/config";

export function configIssues(raw: Record<string, unknown>): string[] {
  try {
    parseConfig(raw);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues.map((i) => `${i.path}: ${i.message}`);
  }
  throw new Error("config was accepted");
}
