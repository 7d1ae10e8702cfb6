/**
 * The pieces of the program's pending-operations warning (stack/pending-operations.ts) that need no
 * engine: parsing an export, the parent pid in /proc, which CLI is asked, what its environment
 * keeps, and every way the export can fail (stand-in CLIs written here: a failing, a garbling and a
 * hanging one). The whole path under the real engine: test/engine/pending-operations.test.ts.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as zlib from "node:zlib";
import { afterAll, describe, expect, it } from "vitest";
import {
  parseCheckpointPendingOperations,
  parsePendingOperations,
  pendingOperationsWarning,
} from "../../engine/pulumi";
import {
  earlierOperations,
  exportEnv,
  findPulumiCli,
  parentPidOfStat,
  readPendingOperations,
  readPendingOperationsFromFile,
  stackArgument,
} from "../../stack/pending-operations";

const work = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-pending-"));
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

/** An executable DIR/pulumi running SCRIPT (sh). */
function cli(dir: string, script: string): string {
  fs.mkdirSync(path.join(work, dir), { recursive: true });
  const file = path.join(work, dir, "pulumi");
  fs.writeFileSync(file, `#!/bin/sh\n${script}\n`, { mode: 0o755 });
  return file;
}

const urn = (type: string, name: string) => `urn:pulumi:dev::gpuhost::${type}::${name}`;

describe("parsePendingOperations", () => {
  it("reads each pending operation's type and URN", () => {
    const doc = {
      version: 3,
      deployment: {
        resources: [],
        pending_operations: [
          {
            type: "creating",
            resource: { urn: urn("gpuhost:index:GpuServingHost$x:VerifiedGeneration", "h-verified") },
          },
          { type: "updating", resource: { urn: urn("command:local:Command", "h-unit") } },
        ],
      },
    };
    expect(parsePendingOperations(JSON.stringify(doc))).toEqual([
      { type: "creating", urn: urn("gpuhost:index:GpuServingHost$x:VerifiedGeneration", "h-verified") },
      { type: "updating", urn: urn("command:local:Command", "h-unit") },
    ]);
  });

  it("finds none in a stack with no deployment yet, or none pending", () => {
    expect(parsePendingOperations('{"version": 3, "deployment": {}}')).toEqual([]);
    expect(parsePendingOperations('{"version": 3, "deployment": {"pending_operations": null}}')).toEqual([]);
    expect(parsePendingOperations('{"version": 3}')).toEqual([]);
  });

  it("refuses what is not an export", () => {
    expect(() => parsePendingOperations("error: no stack")).toThrow();
    expect(() => parsePendingOperations("null")).toThrow(/did not print a deployment/);
    expect(() => parsePendingOperations("[]")).toThrow(/did not print a deployment/);
  });
});

describe("earlierOperations", () => {
  it("leaves out the stack's own create, which this update may have in flight", () => {
    const stack = { type: "creating", urn: urn("pulumi:pulumi:Stack", "gpuhost-dev") };
    const host = { type: "creating", urn: urn("gpuhost:index:GpuServingHost$command:local:Command", "h-prepare") };
    expect(earlierOperations([stack, host])).toEqual([host]);
    expect(pendingOperationsWarning("dev", earlierOperations([stack]))).toBeUndefined();
  });
});

describe("parentPidOfStat", () => {
  it("reads the field after the command name, whatever the name holds", () => {
    expect(parentPidOfStat("4242 (node) S 4200 4242 4200 0 -1")).toBe(4200);
    expect(parentPidOfStat("4242 (a) b (c) S 77 4242 4200 0 -1")).toBe(77);
    expect(parentPidOfStat("garbage")).toBeUndefined();
  });
});

describe("findPulumiCli", () => {
  const onPath = cli("path-bin", "exit 0");
  const project = cli("project-bin", "exit 0");
  const running = cli("running-bin", "exit 0");
  const pathEnv = ["/nonexistent", path.dirname(onPath)].join(path.delimiter);

  it("prefers the CLI running the update (an ancestor named pulumi)", () => {
    const ancestors = ["/usr/bin/node", running, "/usr/bin/bash"];
    expect(findPulumiCli({ ancestors, pathEnv, projectCli: project })).toBe(running);
  });

  it("then pulumi on PATH, then the checkout's own", () => {
    const ancestors = ["/usr/bin/node", `${running} (deleted)`, "/usr/bin/pulumi-language-nodejs"];
    expect(findPulumiCli({ ancestors, pathEnv, projectCli: project })).toBe(onPath);
    expect(findPulumiCli({ ancestors, pathEnv: "/nonexistent", projectCli: project })).toBe(project);
  });

  it("finds none when there is none, and skips what is not executable", () => {
    const notExecutable = path.join(work, "plain", "pulumi");
    fs.mkdirSync(path.dirname(notExecutable), { recursive: true });
    fs.writeFileSync(notExecutable, "", { mode: 0o644 });
    expect(
      findPulumiCli({ ancestors: [], pathEnv: path.dirname(notExecutable), projectCli: path.join(work, "none") }),
    ).toBeUndefined();
  });
});

describe("exportEnv", () => {
  it("drops the decrypted config, the passphrase and the language host's settings; keeps the backend", () => {
    const env = exportEnv({
      PATH: "/usr/bin",
      PULUMI_BACKEND_URL: "file:///state",
      PULUMI_HOME: "/home/u/.pulumi",
      PULUMI_ACCESS_TOKEN: "token",
      PULUMI_CONFIG: '{"gpuhost:apiKey":"plaintext"}',
      PULUMI_CONFIG_SECRET_KEYS: '["gpuhost:apiKey"]',
      PULUMI_CONFIG_PASSPHRASE: "pass",
      PULUMI_CONFIG_PASSPHRASE_FILE: "/pass",
      PULUMI_NODEJS_MONITOR: "127.0.0.1:1",
      PULUMI_NODEJS_ENGINE: "127.0.0.1:2",
    });
    expect(env).toEqual({
      PATH: "/usr/bin",
      PULUMI_BACKEND_URL: "file:///state",
      PULUMI_HOME: "/home/u/.pulumi",
      PULUMI_ACCESS_TOKEN: "token",
      PULUMI_SKIP_UPDATE_CHECK: "true",
      NO_COLOR: "1",
    });
  });
});

describe("stackArgument", () => {
  it("is the short name on a file backend, fully qualified elsewhere", () => {
    expect(stackArgument("organization", "gpuhost", "sim")).toBe("sim");
    expect(stackArgument("acme", "gpuhost", "prod")).toBe("acme/gpuhost/prod");
  });
});

describe("readPendingOperations against stand-in CLIs written in the test", () => {
  const env = { PATH: process.env.PATH };
  it("passes the stack and reads what it prints", () => {
    const doc = { deployment: { pending_operations: [{ type: "creating", resource: { urn: urn("t", "n") } }] } };
    const fake = cli(
      "prints",
      `[ "$1 $2 $3 $4" = "stack export --stack org/p/s" ] || exit 3\necho '${JSON.stringify(doc)}'`,
    );
    expect(readPendingOperations(fake, "org/p/s", env)).toEqual([{ type: "creating", urn: urn("t", "n") }]);
  });

  it("says why when the CLI fails, prints no export, or hangs past the bound", () => {
    const fails = cli("fails", 'echo "error: stack org/p/s not found" >&2; exit 255');
    expect(readPendingOperations(fails, "org/p/s", env)).toMatch(/exited 255: error: stack org\/p\/s not found/);
    const garbles = cli("garbles", "echo 'not json'");
    expect(readPendingOperations(garbles, "org/p/s", env)).toMatch(/stack export: [\s\S]*not valid JSON/);
    const hangs = cli("hangs", "exec sleep 30");
    expect(readPendingOperations(hangs, "org/p/s", env, 500)).toMatch(/ETIMEDOUT/);
    expect(readPendingOperations(path.join(work, "missing", "pulumi"), "org/p/s", env)).toMatch(/ENOENT/);
  });
});

describe("readPendingOperationsFromFile", () => {
  const creating = { type: "creating", resource: { urn: urn("command:local:Command", "h-unit") } };
  const checkpoint = (ops: unknown[] | null) =>
    JSON.stringify({ version: 3, checkpoint: { stack: "dev", latest: { resources: [], pending_operations: ops } } });
  /** A file backend at WORK/NAME holding FILES (relative to its .pulumi/stacks); its environment. */
  const backend = (name: string, files: Record<string, string | Buffer>): NodeJS.ProcessEnv => {
    const root = path.join(work, name);
    for (const [rel, body] of Object.entries(files)) {
      const f = path.join(root, ".pulumi", "stacks", rel);
      fs.mkdirSync(path.dirname(f), { recursive: true });
      fs.writeFileSync(f, body);
    }
    return { PULUMI_BACKEND_URL: `file://${root}` };
  };
  const want = [{ type: "creating", urn: urn("command:local:Command", "h-unit") }];

  it("reads the state file of the stack's project, compressed or not, and a backend's from before projects", () => {
    const plain = backend("b-plain", { "gpuhost/dev.json": checkpoint([creating]) });
    expect(readPendingOperationsFromFile("organization/gpuhost/dev", plain)?.ops).toEqual(want);
    const gz = backend("b-gz", { "gpuhost/dev.json.gz": zlib.gzipSync(checkpoint([creating])) });
    expect(readPendingOperationsFromFile("organization/gpuhost/dev", gz)?.ops).toEqual(want);
    const legacy = backend("b-legacy", { "dev.json": checkpoint([creating]) });
    expect(readPendingOperationsFromFile("organization/gpuhost/dev", legacy)).toEqual({
      ops: want,
      file: path.join(work, "b-legacy", ".pulumi", "stacks", "dev.json"),
    });
    const none = backend("b-none", { "gpuhost/dev.json": checkpoint(null) });
    expect(readPendingOperationsFromFile("organization/gpuhost/dev", none)?.ops).toEqual([]);
  });

  it("leaves to the CLI what it cannot read alone: another backend, no file, two files, another stack, garbage", () => {
    const env = backend("b-other", { "gpuhost/dev.json": checkpoint([creating]) });
    expect(
      readPendingOperationsFromFile("organization/gpuhost/dev", { PULUMI_BACKEND_URL: "https://api.pulumi.com" }),
    ).toBeUndefined();
    expect(readPendingOperationsFromFile("organization/gpuhost/dev", env)?.ops).toEqual(want); // so the others could pass
    expect(readPendingOperationsFromFile("organization/gpuhost/prod", env)).toBeUndefined();
    expect(readPendingOperationsFromFile("organization/other/dev", env)).toBeUndefined();
    const both = backend("b-both", {
      "gpuhost/dev.json": checkpoint([]),
      "gpuhost/dev.json.gz": zlib.gzipSync(checkpoint([creating])),
    });
    expect(readPendingOperationsFromFile("organization/gpuhost/dev", both)).toBeUndefined();
    const garbage = backend("b-garbage", { "gpuhost/dev.json": "{ torn" });
    expect(readPendingOperationsFromFile("organization/gpuhost/dev", garbage)).toBeUndefined();
    const exported = backend("b-export", { "gpuhost/dev.json": JSON.stringify({ version: 3, deployment: {} }) });
    expect(readPendingOperationsFromFile("organization/gpuhost/dev", exported)).toBeUndefined();
  });

  it("parses only a checkpoint", () => {
    expect(parseCheckpointPendingOperations(checkpoint([creating]))).toEqual(want);
    expect(parseCheckpointPendingOperations('{"version": 3, "checkpoint": {"stack": "dev"}}')).toEqual([]);
    expect(() => parseCheckpointPendingOperations('{"version": 3}')).toThrow(/not a Pulumi checkpoint/);
    expect(() => parseCheckpointPendingOperations("null")).toThrow(/not a Pulumi checkpoint/);
  });
});
