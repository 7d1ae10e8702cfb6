/** The language host's pure parts: plugin discovery and the runner's argv (the engine test runs it for real). */
import { describe, expect, it } from "vitest";
import * as path from "node:path";
import { requiredPlugins, runArguments } from "../../engine/offline-plugins/language-host/main";

describe("language host", () => {
  it("finds the command plugin that @pulumi/command 1.2.1 declares", () => {
    const plugins = requiredPlugins(path.resolve(__dirname, "../.."));
    expect(plugins).toContainEqual({ name: "command", version: "v1.2.1", server: undefined });
    expect(plugins.map((p) => p.name)).not.toContain("pulumi");
  });

  it("builds the runner's argv like the Go host: flags, then the program, then its args", () => {
    const argv = runArguments("/run", {
      monitor: "127.0.0.1:1",
      engine: "127.0.0.1:2",
      organization: "org",
      project: "p",
      stack: "s",
      pwd: "/w",
      rootDirectory: "/w",
      dryRun: true,
      parallel: 8,
      program: "/w/dist/index.js",
      args: ["a"],
    });
    expect(argv).toEqual([
      "/run",
      "--monitor",
      "127.0.0.1:1",
      "--engine",
      "127.0.0.1:2",
      "--organization",
      "org",
      "--project",
      "p",
      "--root-directory",
      "/w",
      "--stack",
      "s",
      "--pwd",
      "/w",
      "--dry-run",
      "--parallel",
      "8",
      "/w/dist/index.js",
      "a",
    ]);
  });
});
