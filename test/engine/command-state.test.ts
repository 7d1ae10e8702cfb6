/**
 * gpuhost's command provider stores a remote.Command as upstream's pulumi-resource-command 1.2.1 does,
 * so a stack moves between them without a diff: made with one, previewed with the other, nothing
 * changes (before, the stand-in's `connection` read as changed to upstream's, and every host script
 * would have re-run once). Needs the upstream builds (GPUHOST_UPSTREAM_PLUGINS) and a real sshd.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT, ensureStack, runPulumi } from "../../engine/pulumi";
import {
  type PluginSet,
  type StateExport,
  testEngineOptions,
  upstreamPluginDir,
  writeFixtureProject,
} from "../support/engine";
import { type TestSshd, canRunSshd, startSshd } from "../support/sshd";

const available = upstreamPluginDir() !== undefined && canRunSshd();

describe.skipIf(!available)(
  "remote.Command state: gpuhost's command provider vs upstream's (skipped without GPUHOST_UPSTREAM_PLUGINS or an sshd)",
  () => {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-command-state-"));
    let sshd: TestSshd;
    const opts = (set: PluginSet) => testEngineOptions(work, 180_000, set);
    const pulumi = async (set: PluginSet, stack: string, ...args: string[]) => {
      const r = await runPulumi([...args, "--stack", stack], opts(set));
      if (r.code !== 0) throw new Error(`[${set}] pulumi ${args.join(" ")} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
      return r;
    };
    /** The stored connection of the one remote command, secrets shown (structure and secret markers). */
    const connectionOf = async (set: PluginSet, stack: string) => {
      const state = JSON.parse((await pulumi(set, stack, "stack", "export", "--show-secrets")).stdout) as StateExport;
      const res = state.deployment.resources.find((r) => r.type === "command:remote:Command");
      return { inputs: res!.inputs!.connection, outputs: res!.outputs!.connection };
    };

    beforeAll(async () => {
      sshd = await startSshd();
      const program = path.join(PROJECT_ROOT, "dist", "test", "engine", "fixture", "remote-program.js");
      writeFixtureProject(work, "gpuhost-command-state", program);
      for (const [stack, set] of [
        ["by-stand-in", "stand-ins"],
        ["by-upstream", "upstream"],
      ] as const) {
        await ensureStack(stack, opts(set));
        await pulumi(set, stack, "config", "set", "host", sshd.host);
        await pulumi(set, stack, "config", "set", "port", String(sshd.port));
        await pulumi(set, stack, "config", "set", "hostKey", sshd.hostKey);
        await pulumi(set, stack, "config", "set-all", "--secret", `privateKey=${sshd.privateKey}`);
        await pulumi(set, stack, "up", "--yes", "--skip-preview");
      }
    }, 300_000);

    afterAll(async () => {
      for (const [stack, set] of [
        ["by-stand-in", "stand-ins"],
        ["by-upstream", "upstream"],
      ] as const) {
        await runPulumi(["destroy", "--yes", "--skip-preview", "--stack", stack], opts(set)).catch(() => undefined);
      }
      await sshd?.stop();
      fs.rmSync(work, { recursive: true, force: true });
    }, 300_000);

    it("both store the same connection: the private key a secret of its own inside it", async () => {
      const ours = await connectionOf("stand-ins", "by-stand-in");
      const theirs = await connectionOf("upstream", "by-upstream");
      expect(ours).toEqual(theirs);
      expect(JSON.stringify(theirs.inputs)).toContain("privateKey");
    });

    it("a stack made by one previews with no change under the other, both ways", async () => {
      for (const [stack, set] of [
        ["by-stand-in", "upstream"],
        ["by-upstream", "stand-ins"],
      ] as const) {
        const r = await runPulumi(["preview", "--diff", "--expect-no-changes", "--stack", stack], opts(set));
        expect(r.code, `${stack} under ${set}:\n${r.stdout}\n${r.stderr}`).toBe(0);
        expect(r.stdout).not.toMatch(/~ connection/);
      }
    }, 300_000);
  },
);
