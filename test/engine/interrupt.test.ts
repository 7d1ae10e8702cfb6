/**
 * One Ctrl-C to `pulumi up` while the readiness gate waits inside VerifiedGeneration's create: the
 * terminal sends SIGINT to the whole foreground process group (the CLI, the language host, the
 * program, the plugins), and `pulumi up` must end within seconds, failing the create as
 * interrupted, with no process of the run left behind. The server is written here: it lists the
 * model and never answers a generation, so only the interrupt can end the create. Run under the real
 * engine, once per plugin set (gpuhost's stand-ins, and upstream's where CI provides them).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { PROJECT_ROOT, engineEnv, ensureStack, pulumiBin, runPulumi } from "../../engine/pulumi";
import { pluginSets, testEngineOptions, upstreamPluginDir, writeFixtureProject } from "../support/engine";
import { alive, descendants } from "../support/processes";

describe.each(pluginSets())("one Ctrl-C to pulumi up during the gate (%s)", (plugins) => {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-interrupt-"));
  const opts = testEngineOptions(work, 240_000, plugins);
  const stack = "interrupt-test";
  let server: http.Server;
  let generations = 0;

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      if (req.url?.endsWith("/v1/models")) {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ object: "list", data: [{ id: "stuck-model", object: "model" }] }));
        return;
      }
      // A generation: read the body and never answer.
      generations++;
      req.resume();
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const program = path.join(PROJECT_ROOT, "dist", "test", "engine", "fixture", "interrupt-program.js");
    writeFixtureProject(work, "gpuhost-interrupt-test", program);
    await ensureStack(stack, opts);
    const port = (server.address() as AddressInfo).port;
    const set = await runPulumi(["config", "set", "url", `http://127.0.0.1:${port}`, "--stack", stack], opts);
    expect(set.code, set.stderr).toBe(0);
  }, 120_000);

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    fs.rmSync(work, { recursive: true, force: true });
  });

  /** Starts `pulumi up` and resolves once the gate's first generation reached the server. */
  async function upInGate() {
    // Its own process group, as a shell gives a foreground job: SIGINT to the group is the
    // terminal's Ctrl-C (the engine starts its plugins in process groups of their own).
    const child = spawn(pulumiBin(), ["up", "--yes", "--skip-preview", "--non-interactive", "--stack", stack], {
      cwd: work,
      env: engineEnv(opts),
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    let out = "";
    child.stdout.on("data", (b: Buffer) => (out += b.toString()));
    child.stderr.on("data", (b: Buffer) => (out += b.toString()));
    const exited = new Promise<number | null>((r) => child.on("close", (code) => r(code)));
    const seen = generations;
    for (let i = 0; i < 1200 && generations === seen; i++) await new Promise((r) => setTimeout(r, 50));
    expect(generations, out).toBeGreaterThan(seen);
    const processes = descendants(child.pid!);
    const ended = () => Promise.race([exited, new Promise<"hung">((r) => setTimeout(() => r("hung"), 60_000))]);
    /** The run's processes still alive after up to 4 s. */
    const leftBehind = async () => {
      for (let i = 0; i < 40 && [...processes.keys()].some(alive); i++) await new Promise((r) => setTimeout(r, 100));
      return [...processes].filter(([pid]) => alive(pid)).map(([pid, cmd]) => `${pid} ${cmd}`);
    };
    const cleanup = () => {
      for (const pid of [child.pid!, ...processes.keys()]) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
    };
    return { child, out: () => out, ended, processes, leftBehind, cleanup };
  }

  it("one Ctrl-C: up ends within seconds, the create failed as interrupted, and no process is left", async () => {
    const run = await upInGate();
    try {
      expect(run.processes.size, run.out()).toBeGreaterThanOrEqual(2);
      const t0 = performance.now();
      process.kill(-run.child.pid!, "SIGINT");
      const code = await run.ended();
      const seconds = (performance.now() - t0) / 1000;
      console.log(`[interrupt ${plugins}] Ctrl-C to exit of pulumi up: ${seconds.toFixed(2)} s`);
      expect(code, run.out()).not.toBe("hung");
      expect(code).not.toBe(0);
      expect(seconds, run.out()).toBeLessThan(5);
      expect(run.out()).toMatch(/readiness gate failed.*interrupted \(pulumi is cancelling the update\)/);
      expect(await run.leftBehind(), run.out()).toEqual([]);
    } finally {
      run.cleanup();
    }
  }, 180_000);

  it("kill -9 of pulumi up: every process it started (language host, program, providers) leaves on its own", async () => {
    const run = await upInGate();
    try {
      process.kill(run.child.pid!, "SIGKILL");
      expect(await run.ended()).not.toBe("hung");
      const t0 = performance.now();
      const left = await run.leftBehind();
      const seconds = ((performance.now() - t0) / 1000).toFixed(2);
      console.log(`[interrupt ${plugins}] kill -9: processes left after ${seconds} s: ${left.join("; ") || "none"}`);
      // Upstream's Go language host is not gpuhost's: it stays after kill -9 (measured here: still
      // running 4 s later, where gpuhost's leaves within about 2 s). Every other process must go.
      const upstream = upstreamPluginDir();
      const ours = left.filter((p) => !(upstream && p.includes(`${upstream}/pulumi-language-nodejs`)));
      expect(ours).toEqual([]);
    } finally {
      run.cleanup();
    }
  }, 180_000);
});
