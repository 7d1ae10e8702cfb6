/**
 * The SSH key folders are removed on every exit path of the provider process: a normal end, and
 * the process guard's exit when the engine is gone or on SIGTERM (issue 11.8).
 */
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";

const repo = path.resolve(__dirname, "../..");

/** A child that makes a secret folder (with a key file in it), prints it, then waits or ends. */
function child(mode: "wait" | "exit"): Promise<{ dir: string; exited: Promise<number | null>; kill: () => void }> {
  const code = `
    const { secretTempDir } = require(${JSON.stringify(path.join(repo, "components/host/secret-dirs.ts"))});
    const { installProcessGuard } = require(${JSON.stringify(path.join(repo, "gate/transport/process-guard.ts"))});
    installProcessGuard();
    const s = secretTempDir("gpuhost-ssh-test-");
    require("fs").writeFileSync(s.dir + "/id_target", "PRIVATE KEY", { mode: 0o600 });
    process.stdout.write(s.dir + "\\n");
    if (${JSON.stringify(mode)} === "exit") setTimeout(() => process.exit(0), 100);
    else setInterval(() => undefined, 1000);
  `;
  const p = spawn(process.execPath, ["--import", "tsx", "-e", code], {
    cwd: repo,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise<number | null>((r) => p.once("exit", (c) => r(c)));
  return new Promise((resolve, reject) => {
    p.stdout.once("data", (d) => resolve({ dir: String(d).trim(), exited, kill: () => p.kill("SIGTERM") }));
    p.once("exit", () => reject(new Error("child exited before printing its folder")));
  });
}

describe("secret temporary folders", () => {
  it("are gone after the process exits on its own", async () => {
    const c = await child("exit");
    expect(fs.existsSync(path.join(c.dir, "id_target"))).toBe(true);
    await c.exited;
    expect(fs.existsSync(c.dir)).toBe(false);
  }, 30_000);

  it("are gone after SIGTERM (the process guard exits through process.exit)", async () => {
    const c = await child("wait");
    expect(fs.existsSync(c.dir)).toBe(true);
    c.kill();
    expect(await c.exited).toBe(143);
    expect(fs.existsSync(c.dir)).toBe(false);
  }, 30_000);
});
