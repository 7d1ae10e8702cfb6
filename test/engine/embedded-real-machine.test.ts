/**
 * Issue 42.3: the embedded passphrase is public, so a stack that names a real machine is refused under
 * it, in one sentence, before anything connects. The stack here is the shipped `sim` stack's config
 * file as a user edits it, its encryption salt (the public passphrase's) kept, with the drift check's
 * machine turned into an SSH machine whose key is set with `config set --secret` (encrypted under that
 * passphrase, as the issue found it). The machine's address is a TCP listener of this test that
 * counts connections: gpuhost's commands (stackAccess: the demo, `gpuhost drift`) refuse the stack,
 * and plain `pulumi preview` under the public passphrase (the program's own check) fails with the same
 * sentence; the listener sees no connection. Before the fix `isEmbeddedStack` looked only at `hosts`
 * and the preview SSHed out (the default hostKeyPolicy, pinned, with no hostKey yet reads the key the
 * machine presents, to print it).
 */
import { generateKeyPairSync } from "node:crypto";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  EMBEDDED_PASSPHRASE,
  type EngineOptions,
  ensureStack,
  PROJECT_ROOT,
  runPulumi,
  saltOfPassphrase,
  stackAccess,
} from "../../engine/pulumi";
import { freeLocalPort } from "../../ports";
import { TEST_PASSPHRASE } from "../support/engine";
import { errorLines, expectPlainSentences } from "../support/plain-message";

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-embedded-ssh-"));
const STACK = "sim";
let server: net.Server;
let port: number;
let connections = 0;

/** Engine options on this test's own backend, with PASSPHRASE as the user's environment hands it. */
const options = (passphrase: string): EngineOptions => ({
  cwd: dir,
  stateDir: path.join(dir, "state"),
  timeoutMs: 300_000,
  env: { PULUMI_CONFIG_PASSPHRASE: passphrase },
});

beforeAll(async () => {
  port = await freeLocalPort();
  server = net.createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const projectYaml = fs
    .readFileSync(path.join(PROJECT_ROOT, "Pulumi.yaml"), "utf8")
    .replace(/^main: .*$/m, `main: ${PROJECT_ROOT}`)
    .replace(/^stackConfigDir: .*$/m, "");
  fs.writeFileSync(path.join(dir, "Pulumi.yaml"), projectYaml);
  // The shipped file as it is, its salt included: the stack's secrets go under the public passphrase.
  fs.copyFileSync(path.join(PROJECT_ROOT, "stacks", "Pulumi.sim.yaml"), path.join(dir, "Pulumi.sim.yaml"));
  const opts = options(EMBEDDED_PASSPHRASE);
  await ensureStack(STACK, opts);
  const key = generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString();
  const set = async (...args: string[]) => {
    const r = await runPulumi(["config", "--stack", STACK, ...args], opts);
    expect(r.code, `${r.stdout}${r.stderr}`).toBe(0);
  };
  await set("rm", "--path", "gpuhost:operations.driftCheck.machine.name");
  await set("set", "--path", "gpuhost:operations.driftCheck.machine.kind", "ssh");
  await set("set", "--path", "gpuhost:operations.driftCheck.machine.host", "127.0.0.1");
  await set("set", "--path", "gpuhost:operations.driftCheck.machine.port", String(port), "--type", "int");
  await set("set", "--path", "gpuhost:operations.driftCheck.machine.privateKeySecret", "driftKey");
  // set-all: the key's first line starts with dashes, which `config set` reads as a flag
  await set("set-all", "--secret", `driftKey=${key}`);
}, 600_000);

afterAll(async () => {
  await new Promise((r) => server?.close(r));
  fs.rmSync(dir, { recursive: true, force: true });
});

const REFUSAL =
  /^stack sim names a real machine \(operations\.driftCheck\.machine \(kind ssh\)\), and gpuhost's embedded passphrase is public, so its secrets need your own secrets provider: .*; nothing was connected to\.$/;

describe("an embedded stack that names a real machine (the drift check's SSH machine)", () => {
  it("its config file's salt is the public passphrase's, and its SSH key is a secret under it", () => {
    const config = fs.readFileSync(path.join(dir, "Pulumi.sim.yaml"), "utf8");
    const salt = /^encryptionsalt: (.*)$/m.exec(config)?.[1];
    expect(salt).toBeDefined();
    expect(saltOfPassphrase(salt!, EMBEDDED_PASSPHRASE)).toBe(true);
    expect(saltOfPassphrase(salt!, TEST_PASSPHRASE)).toBe(false);
    expect(config).toMatch(/driftKey:\n\s+secure: /);
    expect(config).toMatch(/kind: ssh/);
  });

  it("gpuhost's commands (stackAccess: the demo, gpuhost drift) refuse it in one sentence, whatever passphrase the user has set", async () => {
    for (const passphrase of [EMBEDDED_PASSPHRASE, TEST_PASSPHRASE]) {
      const access = await stackAccess(STACK, options(passphrase));
      expect(access.embedded).toBe(false);
      expect(access.problem).toMatch(REFUSAL);
    }
    expect(connections).toBe(0);
  });

  it("plain `pulumi preview` under the public passphrase fails with that sentence before anything connects", async () => {
    const r = await runPulumi(["preview", "--stack", STACK], options(EMBEDDED_PASSPHRASE));
    const output = `${r.stdout}\n${r.stderr}`;
    expect(r.code, output).not.toBe(0);
    const line = errorLines(output).find((l) => l.includes("names a real machine"));
    expect(line, output).toMatch(REFUSAL);
    expectPlainSentences(line!);
    expect(connections).toBe(0);
  });
});
