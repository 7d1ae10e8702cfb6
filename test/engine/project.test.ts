/**
 * Plain `pulumi` in the project folder, as a team member runs it: the language host finds the program
 * and its plugins from Pulumi.yaml's `main: .` (package.json names dist/index.js), so `pulumi about`
 * lists the command provider and `pulumi install` leaves the tracked lock file as it is; and every
 * stack but the embedded one lives in the backend the user chose (here a second file backend named
 * by PULUMI_BACKEND_URL), never in .gpuhost/state; while the embedded stacks (every host simulated:
 * sim, sim-fleet) live in .gpuhost/state under the public passphrase for every command, whatever
 * backend and passphrase the user has set. Run with the set-up plugins and, where
 * GPUHOST_UPSTREAM_PLUGINS names upstream builds, with those.
 */
import { execFile, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { promisify } from "node:util";
import {
  EMBEDDED_STACK,
  PROJECT_ROOT,
  embeddedStateDir,
  engineEnv,
  isEmbeddedStack,
  runPulumi,
  secretsProviderProblem,
  stackAccess,
  stackExists,
} from "../../engine/pulumi";
import { TEST_PASSPHRASE, pluginEnv, pluginSets } from "../support/engine";

const lockHash = () =>
  createHash("sha256")
    .update(fs.readFileSync(path.join(PROJECT_ROOT, "package-lock.json")))
    .digest("hex");
const work = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-project-"));
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

describe.each(pluginSets())("plain pulumi in the project folder (%s)", (plugins) => {
  it("pulumi about lists the command provider @pulumi/command asks for", async () => {
    const r = await runPulumi(["about", "--json", "--stack", EMBEDDED_STACK], {
      embedded: true,
      env: pluginEnv(plugins),
      timeoutMs: 120_000,
    });
    expect(r.code, r.stderr).toBe(0);
    const about = JSON.parse(r.stdout) as { plugins: { name: string; kind: string; version: string }[] };
    expect(about.plugins).toContainEqual({ name: "command", kind: "resource", version: "1.2.1" });
  }, 120_000);

  it("pulumi install leaves package-lock.json unchanged", async () => {
    const before = lockHash();
    const r = await runPulumi(["install"], { embedded: true, env: pluginEnv(plugins), timeoutMs: 300_000 });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(lockHash()).toBe(before);
  }, 300_000);
});

describe("stacks other than the embedded one use the user's backend and secrets", () => {
  const backend = path.join(work, "second-backend");
  fs.mkdirSync(backend);
  const stack = `t${Date.now().toString(36)}`;
  const user = { PULUMI_BACKEND_URL: `file://${backend}`, PULUMI_CONFIG_PASSPHRASE: TEST_PASSPHRASE };

  it("a stack made in this project lands in the backend PULUMI_BACKEND_URL names, not in .gpuhost/state", async () => {
    const before = fs.readdirSync(embeddedStateDir(), { recursive: true }).map(String);
    // a throwaway stack config in a project copy (nothing is written into the checkout's stacks/)
    const project = path.join(work, "project");
    fs.mkdirSync(project);
    fs.writeFileSync(
      path.join(project, "Pulumi.yaml"),
      fs
        .readFileSync(path.join(PROJECT_ROOT, "Pulumi.yaml"), "utf8")
        .replace(/^main: .*$/m, `main: ${PROJECT_ROOT}`)
        .replace(/^stackConfigDir: .*$/m, ""),
    );
    const init = await runPulumi(["stack", "init", stack], { cwd: project, env: user, timeoutMs: 60_000 });
    expect(init.code, init.stderr).toBe(0);
    const ls = await runPulumi(["stack", "ls", "--json"], { cwd: project, env: user, timeoutMs: 60_000 });
    expect((JSON.parse(ls.stdout) as { name: string }[]).map((s) => s.name)).toContain(stack);
    expect(
      fs
        .readdirSync(backend, { recursive: true })
        .map(String)
        .some((f) => f.includes(stack)),
    ).toBe(true);
    expect(fs.readdirSync(embeddedStateDir(), { recursive: true }).map(String)).toEqual(before);
    // without a passphrase, the stack is refused in one sentence before the engine starts
    const problem = secretsProviderProblem(stack, {
      cwd: project,
      env: { PULUMI_BACKEND_URL: user.PULUMI_BACKEND_URL, PULUMI_CONFIG_PASSPHRASE: "" },
    });
    expect(problem).toMatch(
      new RegExp(`^stack ${stack} uses the passphrase secrets provider and no passphrase is set`),
    );
    expect(problem!.split(/\.\s/)).toHaveLength(1);
    expect(secretsProviderProblem(stack, { cwd: project, env: user })).toBeUndefined();
    // a KMS-style provider needs no passphrase
    fs.writeFileSync(path.join(project, `Pulumi.${stack}.yaml`), "secretsprovider: awskms://alias/team-key\n");
    expect(secretsProviderProblem(stack, { cwd: project, env: { PULUMI_CONFIG_PASSPHRASE: "" } })).toBeUndefined();
  }, 120_000);

  it("gpuhost drift on such a stack without a passphrase: exit 13 and one sentence, before the engine runs", () => {
    const r = spawnSync("node", [path.join(PROJECT_ROOT, "dist", "cli", "gpuhost.js"), "drift", "--stack", stack], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, PULUMI_BACKEND_URL: `file://${backend}`, PULUMI_CONFIG_PASSPHRASE: "" },
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(r.status).toBe(13);
    expect(r.stderr.trim()).toMatch(
      new RegExp(
        `^gpuhost drift: stack ${stack} uses the passphrase secrets provider and no passphrase is set: [^\n]*\\.$`,
      ),
    );
  }, 60_000);

  it("the sim stack never takes the user's own passphrase, nor another stack the documented one", async () => {
    const { engineEnv, EMBEDDED_PASSPHRASE } = await import("../../engine/pulumi");
    const saved = { ...process.env };
    try {
      process.env.PULUMI_CONFIG_PASSPHRASE_FILE = "/home/someone/team-passphrase";
      process.env.PULUMI_BACKEND_URL = "s3://team-bucket";
      const sim = engineEnv({ embedded: true });
      expect(sim.PULUMI_CONFIG_PASSPHRASE).toBe(EMBEDDED_PASSPHRASE);
      expect(sim.PULUMI_CONFIG_PASSPHRASE_FILE).toBeUndefined();
      expect(sim.PULUMI_BACKEND_URL).toBe(`file://${embeddedStateDir()}`);
      const other = engineEnv({});
      expect(other.PULUMI_CONFIG_PASSPHRASE).not.toBe(EMBEDDED_PASSPHRASE);
      expect(other.PULUMI_CONFIG_PASSPHRASE_FILE).toBe("/home/someone/team-passphrase");
      expect(other.PULUMI_BACKEND_URL).toBe("s3://team-bucket");
    } finally {
      process.env = saved;
    }
  });
});

describe("the embedded stacks (every host simulated) use the project's backend and passphrase in every command", () => {
  // A user who has their own backend and no passphrase set: what the embedded stacks must ignore.
  const elsewhere = path.join(work, "users-backend");
  fs.mkdirSync(elsewhere, { recursive: true });
  const userEnv = (): NodeJS.ProcessEnv => {
    const env: NodeJS.ProcessEnv = { ...process.env, PULUMI_BACKEND_URL: `file://${elsewhere}` };
    delete env.PULUMI_CONFIG_PASSPHRASE;
    delete env.PULUMI_CONFIG_PASSPHRASE_FILE;
    return env;
  };

  it("the shipped sim and sim-fleet are embedded while every host is simulated; story, testhost and a user's own simulated stack are not", () => {
    expect(["sim", "sim-fleet", "story", "testhost", "no-such-stack"].filter((s) => isEmbeddedStack(s))).toEqual([
      "sim",
      "sim-fleet",
    ]);
    // one SSH host among simulated ones makes even a shipped stack the user's; a stack the user made
    // is theirs however simulated (it may hold their own secrets)
    const project = path.join(work, "mixed");
    fs.mkdirSync(project, { recursive: true });
    fs.writeFileSync(path.join(project, "Pulumi.yaml"), "name: gpuhost\nruntime: nodejs\n");
    const hosts = (kinds: string[]) =>
      `config:\n  gpuhost:hosts:\n${kinds.map((k, i) => `    - name: h${i}\n      connection:\n        kind: ${k}\n`).join("")}`;
    fs.writeFileSync(path.join(project, "Pulumi.sim.yaml"), hosts(["simulated", "ssh"]));
    fs.writeFileSync(path.join(project, "Pulumi.sim-fleet.yaml"), hosts(["simulated", "simulated"]));
    fs.writeFileSync(path.join(project, "Pulumi.allsim.yaml"), hosts(["simulated", "simulated"]));
    fs.writeFileSync(path.join(project, "Pulumi.nohosts.yaml"), "config: {}\n");
    expect(isEmbeddedStack("sim", project)).toBe(false);
    expect(isEmbeddedStack("sim-fleet", project)).toBe(true);
    expect(isEmbeddedStack("allsim", project)).toBe(false);
    expect(isEmbeddedStack("nohosts", project)).toBe(false);
  });

  it("stackAccess: sim-fleet on .gpuhost/state with the public passphrase, the user's backend and passphrase set aside; story refused", async () => {
    const saved = { ...process.env };
    try {
      process.env = userEnv();
      process.env.PULUMI_CONFIG_PASSPHRASE_FILE = "/home/someone/team-passphrase";
      const fleet = await stackAccess("sim-fleet");
      expect(fleet).toMatchObject({ stack: "sim-fleet", embedded: true, problem: undefined });
      const env = engineEnv(fleet.opts);
      expect(env.PULUMI_BACKEND_URL).toBe(`file://${embeddedStateDir()}`);
      expect(env.PULUMI_CONFIG_PASSPHRASE_FILE).toBeUndefined();
      delete process.env.PULUMI_CONFIG_PASSPHRASE_FILE;
      const story = await stackAccess("story");
      expect(story.embedded).toBe(false);
      expect(engineEnv(story.opts).PULUMI_BACKEND_URL).toBe(`file://${elsewhere}`);
      expect(story.problem).toMatch(/^stack story uses the passphrase secrets provider and no passphrase is set: /);
    } finally {
      process.env = saved;
    }
  });

  it.each([
    ["no passphrase", undefined],
    ["the user's own passphrase", TEST_PASSPHRASE],
  ])(
    "gpuhost drift --stack sim-fleet with %s and PULUMI_BACKEND_URL elsewhere: the embedded stack",
    async (_, passphrase) => {
      const upInEmbedded = await stackExists("sim-fleet", { embedded: true, timeoutMs: 120_000 });
      expect(upInEmbedded).not.toBeUndefined();
      const r = await promisify(execFile)(
        "node",
        [path.join(PROJECT_ROOT, "dist", "cli", "gpuhost.js"), "drift", "--stack", "sim-fleet"],
        {
          cwd: PROJECT_ROOT,
          env: { ...userEnv(), PULUMI_CONFIG_PASSPHRASE: passphrase },
          timeout: 300_000,
          encoding: "utf8",
        },
      ).then(
        (ok) => ({ code: 0, stdout: ok.stdout, stderr: ok.stderr }),
        (e: { code: number; stdout: string; stderr: string }) => e,
      );
      expect(r.stderr).not.toMatch(/passphrase/);
      if (upInEmbedded) {
        // brought up in this checkout: the refresh ran on it (a verdict on its hosts, whatever it is)
        expect(r.stdout, r.stderr).toMatch(
          /^gpuhost drift \(stack sim-fleet\): (clean|DRIFT|ERROR \([a-z-]+\)): 3 host\(s\) probed/,
        );
      } else {
        // never brought up here: one sentence with the command that brings it up
        expect(r.code).toBe(12);
        expect(r.stderr.trim()).toBe(
          "gpuhost drift: stack sim-fleet has not been brought up (the project's embedded backend, .gpuhost/state, holds no such stack): run `GPUHOST_STACK=sim-fleet npm run demo -- --stack` first.",
        );
      }
      // nothing landed in the user's backend
      expect(fs.readdirSync(elsewhere)).toEqual([]);
    },
    300_000,
  );
});
