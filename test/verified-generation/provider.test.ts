/**
 * The VerifiedGeneration provider's methods as plain functions (the engine's closure serialization
 * cannot run inside vitest), loading the compiled gate by path as they do under the engine.
 */
import { PULUMI_UNKNOWN } from "../../components/provider-helpers";
import { spawn } from "node:child_process";
import * as net from "node:net";
import { appendFileSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { VerifiedGenerationOutputsSchema } from "../../gate/reports/outputs";
import { check, create, diff, PROVIDER_VERSION, read, update } from "../../components/verified-generation/provider";
import { startSimulator } from "../../simulator/index";
import { tinyVariant } from "../gate/sim-fixture";
import { verificationInputs } from "./inputs";
import { derivedProfile } from "../simulator/helpers";
import { neverAnswering } from "../gate/misbehaving-servers";
import { fingerprint } from "../../components/host-key/probe";
import { canRunSshd, startSshd } from "../support/sshd";

const repo = path.resolve(__dirname, "../..");
let closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers) await c();
  closers = [];
});

/** A simulator whose log lines and unit state land in files, read back by commands as over SSH. */
async function sim(faults: string[] = [], profile = "tiny") {
  const dir = mkdtempSync(path.join(tmpdir(), "gpuhost-vg-host-"));
  const logFile = path.join(dir, "journal");
  const stateFile = path.join(dir, "state");
  writeFileSync(logFile, "");
  writeFileSync(stateFile, "ActiveState=active\nNRestarts=0\n");
  const s = await startSimulator({
    profile,
    port: 0,
    faults,
    timeScale: 10,
    log: (line) => appendFileSync(logFile, line + "\n"),
    onExit: (code) => writeFileSync(stateFile, `ActiveState=${code === 0 ? "inactive" : "failed"}\nNRestarts=0\n`),
  });
  closers.push(() => s.close());
  return {
    url: s.url,
    close: () => s.close(),
    serviceStateCommand: ["cat", stateFile],
    serviceLogsCommand: ["tail", "-n", "50", logFile],
  };
}

/** Two levels (C=2, 4), an activation and a workload to plan for. */
function inputs(url: string, over: Record<string, unknown> = {}): Record<string, unknown> {
  const base = verificationInputs(url);
  return verificationInputs(url, {
    activation: "20261202T080000.000000001Z-42",
    benchPlan: { ...(base.benchPlan as object), concurrency: [2, 4] },
    workload: { completions: 900_000, outputTokensPerCompletion: 2000 },
    ...over,
  });
}

describe("VerifiedGeneration provider", () => {
  it("create: verifies, benchmarks and plans; outs carry the inputs and the documented outputs", async () => {
    const host = await sim();
    const res = await create(
      inputs(host.url, { serviceStateCommand: host.serviceStateCommand, serviceLogsCommand: host.serviceLogsCommand }),
    );
    const outs = res.outs as Record<string, unknown>;
    const parsed = VerifiedGenerationOutputsSchema.parse(outs);
    expect(parsed.generating).toBe(true);
    expect(parsed.model).toBe("tiny");
    expect(parsed.sweep.map((l) => l.concurrency)).toEqual([2, 4]);
    expect(parsed.sustainedOutputTokensPerSecond).toBeGreaterThan(0);
    expect(parsed.capacity.totalOutputTokens).toBe(1.8e9);
    expect(parsed.capacity.daysOnOneHost).toBeCloseTo(1.8e9 / (parsed.sustainedOutputTokensPerSecond * 86400), 6);
    expect(parsed.readiness.phases.map((p) => p.phase)).toEqual([
      "connect",
      "models",
      "generate",
      "stability",
      "answers",
    ]);
    expect(outs.toolkitFingerprint).toBe("cuda-toolkit-13-0=13.0.2-1");
    expect(outs.providerVersion).toBe(PROVIDER_VERSION);
    expect(res.id).toContain("tiny@");
    expect(JSON.parse(JSON.stringify(outs))).toEqual(outs); // plain data only: state can hold it
  });

  it("create fails with the gate's diagnosis, curand.h line included, when the first generation kills the server", async () => {
    const host = await sim(["jit-crash"]);
    const t0 = performance.now();
    await expect(
      create(
        inputs(host.url, {
          serviceStateCommand: host.serviceStateCommand,
          serviceLogsCommand: host.serviceLogsCommand,
        }),
      ),
    ).rejects.toThrow(
      /phase "generate"[\s\S]*ActiveState=failed[\s\S]*fatal error: curand\.h: No such file or directory/,
    );
    expect((performance.now() - t0) / 1000).toBeLessThan(21);
  });

  it("create behind a router (failureIsOutcome): the same failure is recorded as generating false with its diagnosis, and the next up verifies again", async () => {
    const host = await sim(["jit-crash"]);
    const res = await create(
      inputs(host.url, {
        serviceStateCommand: host.serviceStateCommand,
        serviceLogsCommand: host.serviceLogsCommand,
        failureIsOutcome: true,
      }),
    );
    const outs = res.outs as Record<string, unknown>;
    expect(outs.generating).toBe(false);
    expect(outs.gateFailure).toMatch(/phase "generate"[\s\S]*curand\.h: No such file or directory/);
    expect(outs.sustainedOutputTokensPerSecond).toBeUndefined();
    expect(outs.capacity).toBeUndefined();
    expect((await diff("id", outs, inputs(host.url, { failureIsOutcome: true }))).replaces).toContain("generating");
  });

  it("create fails naming the draft model when speculative acceptance is below the floor; passes above it", async () => {
    const poor = derivedProfile("tiny", (p) => {
      p.speculative = { algorithm: "EAGLE3" };
      p.drafts!.EAGLE3!.acceptLength = [{ batch: 1, value: 1.05 }];
    });
    const bad = await sim([], poor);
    const speculative = { algorithm: "EAGLE3", draftModelPath: "/models/Kimi-K2.6-EAGLE3", acceptanceFloor: 1.5 };
    await expect(create(inputs(bad.url, { speculative }))).rejects.toThrow(
      /below the floor 1\.5 for the EAGLE3 draft model \/models\/Kimi-K2\.6-EAGLE3/,
    );
    const good = derivedProfile("tiny", (p) => {
      p.speculative = { algorithm: "EAGLE3" };
    });
    const ok = await sim([], good);
    const res = await create(inputs(ok.url, { speculative }));
    expect((res.outs as Record<string, unknown>).speculative).toEqual(speculative);
  });

  it("create fails, publishing no plan, when a sweep level breaks the error budget (HTTP 500 at C=4)", async () => {
    // overload-500 at threshold 2: at C=2 every request runs; at C=4 the 3rd and 4th in flight get HTTP 500.
    const host = await sim(["overload-500"], tinyVariant({ faultSettings: { overload500: { threshold: 2 } } }));
    const plan = { ...(inputs(host.url).benchPlan as object), sweepMaxTokens: 1024 };
    // The answer check two at a time, as C=2 runs: the overload is the sweep's C=4 alone.
    const verifyPolicy = { deadlineSeconds: 20, answers: { concurrency: 2 } };
    await expect(create(inputs(host.url, { benchPlan: plan, verifyPolicy }))).rejects.toThrow(
      /broke its error budget of 1\.00 % at C=4: \d+\/4 failed \(HTTP 500[\s\S]*no throughput or capacity plan is published/,
    );
  });

  it("diff: what defines the served thing or its measurement replaces; other changes update; unchanged is no change", async () => {
    const olds = { ...inputs("http://127.0.0.1:1"), generating: true, sustainedOutputTokensPerSecond: 10 };
    expect(await diff("id", olds, inputs("http://127.0.0.1:1"))).toMatchObject({ changes: false, replaces: [] });
    // Key order is not a change.
    const reordered = Object.fromEntries(Object.entries(inputs("http://127.0.0.1:1")).reverse());
    expect((await diff("id", olds, reordered)).changes).toBe(false);
    // activation: a start gpuhost made (a reverted rollout's too, whose identity was verified before).
    for (const key of ["serviceIdentity", "activation", "toolkitFingerprint", "environmentLock"]) {
      expect(await diff("id", olds, inputs("http://127.0.0.1:1", { [key]: "changed" }))).toMatchObject({
        changes: true,
        replaces: [key],
      });
    }
    expect((await diff("id", olds, inputs("http://127.0.0.1:2"))).replaces).toEqual(["endpoint"]);
    expect(
      (
        await diff(
          "id",
          olds,
          inputs("http://127.0.0.1:1", { endpoint: { url: "http://127.0.0.1:1", model: "other" } }),
        )
      ).replaces,
    ).toEqual(["endpoint"]);
    // Issue 18.9: a changed plan measures again; the figures never stay from the earlier plan.
    expect(await diff("id", olds, inputs("http://127.0.0.1:1", { benchPlan: { concurrency: [30] } }))).toMatchObject({
      changes: true,
      replaces: ["benchPlan"],
    });
    expect((await diff("id", olds, inputs("http://127.0.0.1:1", { timeScale: 10 }))).replaces).toEqual(["timeScale"]);
    for (const over of [{ providerVersion: "0" }, { workload: { completions: 5 } }, { serviceLogsCommand: ["true"] }]) {
      expect(await diff("id", olds, inputs("http://127.0.0.1:1", over))).toMatchObject({ changes: true, replaces: [] });
    }
    // Unknown during preview: treated as changed.
    expect(
      (await diff("id", olds, inputs("http://127.0.0.1:1", { toolkitFingerprint: PULUMI_UNKNOWN }))).replaces,
    ).toEqual(["toolkitFingerprint"]);
    // A refresh found the host not generating: the next up verifies again.
    expect((await diff("id", { ...olds, generating: false }, inputs("http://127.0.0.1:1"))).replaces).toEqual([
      "generating",
    ]);
  });

  it("update re-plans capacity from the stored measurement without measuring again", async () => {
    const olds = {
      ...inputs("http://127.0.0.1:1"),
      generating: true,
      sustainedOutputTokensPerSecond: 800,
      saturationConcurrency: 32,
      capacity: { stale: true },
    };
    const { outs } = await update(
      "id",
      olds,
      inputs("http://127.0.0.1:1", {
        workload: { completions: 100_000, outputTokensPerCompletion: 1000, hosts: 2 },
        providerVersion: "2",
      }),
    );
    expect(outs.sustainedOutputTokensPerSecond).toBe(800);
    expect(outs.saturationConcurrency).toBe(32);
    expect(outs.providerVersion).toBe("2");
    expect((outs.capacity as { totalOutputTokens: number }).totalOutputTokens).toBe(1e8);
    expect((outs.capacity as { daysOnHosts: number }).daysOnHosts).toBeCloseTo(1e8 / (800 * 86400) / 2, 9);
  });

  it("read: a generating host is unchanged; a host that stopped generating is drift (generating: false)", async () => {
    const host = await sim();
    const created = await create(inputs(host.url));
    const props = created.outs as Record<string, unknown>;
    const live = await read(created.id, props);
    // The read adds what its health check measured (issue 27.4); the record is otherwise unchanged.
    const { healthCheck, ...recorded } = live.props;
    expect(recorded).toEqual(props);
    expect(healthCheck).toMatchObject({ findings: [], notChecked: null, answerMatches: true });
    expect(live.inputs).toEqual(inputs(host.url));
    await host.close();
    const dead = await read(created.id, props);
    expect(dead.props.generating).toBe(false);
    expect(dead.props.generationCheck).toBe("connection refused");
    expect(dead.props.sustainedOutputTokensPerSecond).toBe(props.sustainedOutputTokensPerSecond);
    expect(dead.inputs).toEqual(inputs(host.url));
  });

  it("read: a host that accepts and never answers reads as not generating after verification.refreshTimeoutSeconds, not the default 60 s", async () => {
    const silent = await neverAnswering();
    try {
      const state = {
        ...inputs(silent.url, { verifyPolicy: { refreshTimeoutSeconds: 1 } }),
        generating: true,
        drift: [],
      };
      const t0 = Date.now();
      const refreshed = await read("id", state);
      expect(refreshed.props.generating).toBe(false);
      expect(String(refreshed.props.generationCheck)).toMatch(/1 s|timed? ?out/i);
      // Far below the default's 60 s: the knob, not the default, bounded it (generous for a loaded machine).
      expect(Date.now() - t0).toBeLessThan(30_000);
    } finally {
      await silent.close();
    }
  });

  it("inputs decoded once by the schema: a bad one fails create naming it; a refresh decodes only the inputs it reads", async () => {
    // A port nothing listens on: a request there would fail differently from the inputs' error.
    const srv = net.createServer();
    await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(srv.address() as net.AddressInfo).port}`;
    await new Promise((resolve) => srv.close(resolve));
    await expect(create(inputs(url, { endpoint: { url, model: 7 } }))).rejects.toThrow(
      /^the resource's inputs are not valid: endpoint\.model: /,
    );
    await expect(create(inputs(url, { timeScale: "fast" }))).rejects.toThrow(/not valid: timeScale: /);
    // An older state whose plan holds a knob the schema no longer has: the refresh reads the
    // service (gone here), not the plan, so it records the finding instead of failing.
    const state = { ...inputs(url, { benchPlan: { retiredKnob: 1 } }), generating: true, drift: [] };
    const refreshed = await read("id", state);
    expect(refreshed.props.generating).toBe(false);
    expect(refreshed.props.generationCheck).toBe("connection refused");
    // An input the refresh does read is judged: named, not used as it is.
    await expect(read("id", { ...state, endpoint: { url: 5, model: "tiny" } })).rejects.toThrow(
      /not valid: endpoint\.url: /,
    );
  });

  it("check: reports bad knobs by path, a missing compiled gate, and missing identity", async () => {
    const bad = await check(
      {},
      inputs("http://x", { verifyPolicy: { deadlineSeconds: -1 }, benchPlan: { concurrency: [] } }),
    );
    expect(bad.failures.map((f) => f.reason).join("\n")).toMatch(
      /verifyPolicy\.deadlineSeconds[\s\S]*benchPlan\.concurrency/,
    );
    expect((await check({}, inputs("http://x", { serviceIdentity: "" }))).failures[0].property).toBe("serviceIdentity");
    expect((await check({}, inputs("http://x"))).failures).toEqual([]);
    // A URL the gate could not use is refused before any request, in one sentence naming it.
    for (const url of ["localhost:30000", "127.0.0.1:30000", "ftp://h:1", "http://[::1:30000"]) {
      const f = (await check({}, inputs(url))).failures;
      expect(f.map((x) => x.property)).toEqual(["endpoint"]);
      expect(f[0].reason).toContain(JSON.stringify(url));
    }
  });

  describe("in the dynamic-provider host (a process the engine started)", () => {
    /** A stand-in engine (a listening gRPC port) and the provider host process running create. */
    async function hosted() {
      const silent = await neverAnswering();
      closers.push(() => silent.close());
      const engine = net.createServer((s) => s.destroy());
      await new Promise<void>((r) => engine.listen(0, "127.0.0.1", r));
      const address = `127.0.0.1:${(engine.address() as net.AddressInfo).port}`;
      closers.push(() => new Promise((r) => engine.close(() => r())));
      const child = spawn(
        process.execPath,
        ["--import", "tsx", path.join(__dirname, "fixtures/fake-dynamic-provider.ts"), silent.url, address],
        { cwd: repo, stdio: ["ignore", "pipe", "pipe"] },
      );
      closers.push(async () => void child.kill("SIGKILL"));
      let out = "";
      child.stdout.on("data", (d) => (out += d));
      const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
      const until = async (pattern: RegExp, ms: number) => {
        const end = performance.now() + ms;
        while (!pattern.test(out) && performance.now() < end) await new Promise((r) => setTimeout(r, 20));
        return pattern.test(out);
      };
      return { child, engine, out: () => out, exited, until };
    }

    it("one SIGINT stops the gate inside create within seconds, not its deadline (create fails, saying interrupted)", async () => {
      const h = await hosted();
      let err = "";
      h.child.stderr.on("data", (d) => (err += d));
      expect(await h.until(/started/, 20_000)).toBe(true);
      // The gate is waiting on the never-answering server.
      for (let i = 0; i < 500 && !/models: GET/.test(err); i++) await new Promise((r) => setTimeout(r, 20));
      expect(err).toMatch(/models: GET/);
      const t0 = performance.now();
      h.child.kill("SIGINT");
      // Usually well under a second; the bound leaves room for a loaded machine.
      expect(await h.until(/create failed/, 15_000), h.out()).toBe(true);
      expect((performance.now() - t0) / 1000).toBeLessThan(10);
      expect(h.out()).toMatch(/create failed: readiness gate failed .*: interrupted \(SIGINT\)/);
    }, 40_000);

    it("the engine gone (its port closed, its end of stderr closed): the process exits, no EPIPE loop", async () => {
      const h = await hosted();
      expect(await h.until(/started/, 20_000)).toBe(true);
      await new Promise((r) => setTimeout(r, 500));
      // kill -9 of pulumi: its gRPC port closes and nobody reads the provider's stderr any more.
      const t0 = performance.now();
      await new Promise((r) => h.engine.close(() => r(undefined)));
      h.child.stderr.destroy();
      const code = await Promise.race([h.exited, new Promise((r) => setTimeout(() => r("still running"), 8_000))]);
      expect(code).toBe(1);
      expect((performance.now() - t0) / 1000).toBeLessThan(5);
    }, 40_000);
  });
});

// The host reached over SSH (hostAccess) through a real OpenSSH server on loopback whose host key is
// swapped, as after a reinstall: refresh reads with the connection stored in the state (old key).
describe.skipIf(process.env.GPUHOST_SKIP_TESTHOST === "1")(
  "VerifiedGeneration over SSH when the host key changed",
  () => {
    it("read keeps the record marked hostKeyRefused; the update checks with the current key, or fails on the old one", async () => {
      if (!canRunSshd())
        throw new Error("this test needs root and /usr/sbin/sshd (set GPUHOST_SKIP_TESTHOST=1 to skip it knowingly)");
      const sshd = await startSshd();
      closers.push(() => sshd.stop());
      const host = await sim();
      const access = (hostKey: string) => ({
        hostAccess: {
          connection: {
            kind: "ssh",
            host: sshd.host,
            port: sshd.port,
            user: "root",
            privateKey: sshd.privateKey,
            hostKey,
          },
          unit: "sglang-tiny.service",
          remoteHost: "127.0.0.1",
          remotePort: Number(new URL(host.url).port),
        },
      });
      const first = sshd.hostKey;
      // What create recorded (measured before): kept by every step below.
      const recorded = {
        ...inputs("http://127.0.0.1:30000", access(first)),
        generating: true,
        sustainedOutputTokensPerSecond: 800,
        saturationConcurrency: 32,
      };
      const live = await read("id", recorded);
      expect(live.props).toMatchObject({ generating: true, generationCheck: "ok" });
      expect(live.props.hostKeyRefused).toBeUndefined();

      await sshd.swapHostKey();
      const refused = await read("id", recorded);
      expect(refused.props.hostKeyRefused).toContain(
        `presented ssh-ed25519 ${fingerprint(sshd.hostKey)}, but hostKey pins ssh-ed25519 ${fingerprint(first)}`,
      );
      expect(refused.props).toMatchObject({ generating: true, sustainedOutputTokensPerSecond: 800 });
      expect(refused.inputs).toEqual(inputs("http://127.0.0.1:30000", access(first)));

      // The user pinned the new key: an update (no new measurement), whose check goes through.
      const repinned = inputs("http://127.0.0.1:30000", access(sshd.hostKey));
      expect(await diff("id", refused.props, repinned)).toMatchObject({ changes: true, replaces: [] });
      const { outs } = await update("id", refused.props, repinned);
      expect(outs.hostKeyRefused).toBeUndefined();
      expect(outs).toMatchObject({ generating: true, generationCheck: "ok", sustainedOutputTokensPerSecond: 800 });

      // Nobody re-pinned (an impostor, or a reinstall not checked yet): still a change, and the update fails.
      const samePin = inputs("http://127.0.0.1:30000", access(first));
      expect((await diff("id", refused.props, samePin)).changes).toBe(true);
      await expect(update("id", refused.props, samePin)).rejects.toThrow(
        `presented ssh-ed25519 ${fingerprint(sshd.hostKey)}, but hostKey pins ssh-ed25519 ${fingerprint(first)}`,
      );
    }, 60_000);
  },
);
