/** The engine log (GPUHOST_ENGINE_LOG) names each command without the values a secret could be. */
import { describe, expect, it } from "vitest";
import { loggedArgs } from "../../engine/pulumi";

describe("the engine log's line for a command", () => {
  it("leaves out a config command's keys and values, whatever the subcommand", () => {
    const key = "-----BEGIN OPENSSH PRIVATE KEY-----abc";
    for (const args of [
      ["config", "set", "--path", "gpuhost:apiKey", "s3cret", "--secret"],
      ["config", "set-all", "--path", "--secret", `gpuhost:ssh.privateKey=${key}`],
    ]) {
      const line = loggedArgs(args);
      expect(line).toMatch(/^config set(-all)? \(its arguments left out/);
      expect(line).not.toContain("s3cret");
      expect(line).not.toContain(key);
    }
  });

  it("keeps other commands whole but a --config value", () => {
    expect(loggedArgs(["up", "--yes", "--skip-preview", "--json"])).toBe("up --yes --skip-preview --json");
    expect(loggedArgs(["up", "--config", "gpuhost:apiKey=s3cret", "--yes"])).toBe("up --config gpuhost:apiKey=… --yes");
  });
});
