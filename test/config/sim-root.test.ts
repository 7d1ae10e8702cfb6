// #12.6: a simulated host's root stays inside the project's .gpuhost/: `..`, absolute paths elsewhere
// and symlinks leading out are refused, each error naming the config path.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError, parseConfig, simulatedRoot } from "../../stack/config";
import { projectRoot } from "../../project-files";

const ROOT_PATH = "gpuhost:hosts[0].connection.root";
const withRoot = (root: string) => ({ hosts: [{ name: "s", connection: { kind: "simulated", root } }] });

function rootIssues(root: string): string[] {
  try {
    parseConfig(withRoot(root));
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues.map((i) => `${i.path}: ${i.message}`);
  }
  return [];
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-sim-root-"));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe("hosts[i].connection.root of a simulated host", () => {
  it.each([
    ".gpuhost/sim-hosts/a",
    "./.gpuhost/x",
    ".gpuhost/a/b/c",
    path.join(projectRoot(), ".gpuhost", "sim-hosts", "abs"),
  ])("accepts %s, a folder under the project's .gpuhost/", (root) => {
    expect(rootIssues(root)).toEqual([]);
    const c = parseConfig(withRoot(root));
    expect(simulatedRoot(c.hosts[0], projectRoot())).toBe(path.resolve(projectRoot(), root));
  });

  it.each(["/..", "/../etc", ".gpuhost/../..", ".gpuhost/sim-hosts/../../x", "../elsewhere"])(
    "refuses %s (contains '..') naming the config path",
    (root) => {
      expect(rootIssues(root)).toContain(`${ROOT_PATH}: must not contain '..'`);
    },
  );

  it.each(["/", "/var/lib/gpuhost-sim", "/tmp/sim", os.homedir(), "sim-hosts/a", ".gpuhost", ".gpuhostx/a", "dist/x"])(
    "refuses %s, which is not under the project's .gpuhost/, naming the config path",
    (root) => {
      const found = rootIssues(root);
      expect(found).toHaveLength(1);
      expect(found[0]).toMatch(
        new RegExp(`^${ROOT_PATH.replace(/[[\]]/g, "\\$&")}: must be a folder under the project's \\.gpuhost/`),
      );
    },
  );

  it("refuses a root that a symlink inside .gpuhost/ leads out of the project", () => {
    const project = path.join(tmp, "project");
    const outside = path.join(tmp, "outside");
    fs.mkdirSync(path.join(project, ".gpuhost"), { recursive: true });
    fs.mkdirSync(outside);
    fs.symlinkSync(outside, path.join(project, ".gpuhost", "link"));
    const host = { name: "s", connection: { kind: "simulated" as const, root: ".gpuhost/link/host" } };
    const c = parseConfig({ hosts: [host] });
    expect(() => simulatedRoot(c.hosts[0], project, 3)).toThrow(ConfigError);
    expect(() => simulatedRoot(c.hosts[0], project, 3)).toThrow(
      /gpuhost:hosts\[3\]\.connection\.root: .*link\/host is not a folder under the project's \.gpuhost\//,
    );
    // Checking wrote nothing: the folder it refused does not exist.
    expect(fs.readdirSync(outside)).toEqual([]);
  });
});
