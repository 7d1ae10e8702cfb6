/**
 * The loud-failure contract: a machine that cannot boot the test host fails the suite unless
 * GPUHOST_SKIP_TESTHOST=1 says to skip. Simulated here by a PATH holding none of the tools.
 */
import { mkdtempSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { requireTestHost, SKIP_ENV, testHostUnavailableReason } from "./harness";

describe("test host availability (PATH without systemd-nspawn)", () => {
  const saved = { path: process.env.PATH, skip: process.env[SKIP_ENV] };
  beforeEach(() => {
    process.env.PATH = mkdtempSync(path.join(os.tmpdir(), "gpuhost-empty-path-"));
    delete process.env[SKIP_ENV];
  });
  afterEach(() => {
    process.env.PATH = saved.path;
    if (saved.skip === undefined) delete process.env[SKIP_ENV];
    else process.env[SKIP_ENV] = saved.skip;
  });

  it("names the missing tool", () => {
    if (process.getuid?.() !== 0) {
      expect(testHostUnavailableReason()).toMatch(/not running as root/);
    } else {
      expect(testHostUnavailableReason()).toMatch(/systemd-nspawn is not installed/);
    }
  });

  it("fails loudly when the opt-out is not set", () => {
    expect(() => requireTestHost()).toThrow(/cannot boot the real Debian test host.*GPUHOST_SKIP_TESTHOST=1/s);
  });

  it("skips (returns false) only with GPUHOST_SKIP_TESTHOST=1", () => {
    process.env[SKIP_ENV] = "1";
    expect(requireTestHost()).toBe(false);
    process.env[SKIP_ENV] = "yes"; // anything but 1 is not an opt-out
    expect(() => requireTestHost()).toThrow();
  });
});
