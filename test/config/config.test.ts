import { describe, expect, it } from "vitest";
import { configPath, hostConnection, parseConfig, simulatedRoot } from "../../stack/config";
import { stackConfig } from "./stacks";
import { configIssues } from "../support/config-issues";
import { toolkitReleases } from "../../components/cuda-catalog/catalog";

const sim = { hosts: [{ name: "sim-1", connection: { kind: "simulated" } }] };
const KEY = "0123456789abcdef0123456789abcdef";

const issues = configIssues;

describe("stack config schema", () => {
  it("fills every default from one host", () => {
    const c = parseConfig(sim);
    expect(c.services).toMatchObject({
      active: "autoregressive",
      host: "127.0.0.1",
      port: 30000,
      tp: 1,
      timeoutStartSec: 600,
    });
    expect(c.environment.packages.torch).toMatch(/\+cu130$/);
    expect(c.toolkit.release).toBe("13.0");
    expect(c.verification.deadlineSeconds).toBe(1800);
    expect(c.benchmark.concurrency).toEqual([8, 16, 32, 48, 64]);
    expect(c.workload.completions).toBe(900000);
    expect(c.simulator).toMatchObject({ profile: "tiny", faults: [], timeScale: 1 });
  });

  it("errors carry the config path: a port of 70000", () => {
    expect(issues({ ...sim, services: { port: 70000 } })).toEqual([
      "gpuhost:services.port: Too big: expected number to be <=65535",
    ]);
  });

  it("host key policy: pinned by default; a set hostKey with another policy is refused, naming the path", () => {
    const ssh = (connection: Record<string, unknown>) => ({
      hosts: [{ name: "h", connection: { kind: "ssh", host: "h", ...connection } }],
    });
    const c = parseConfig(ssh({ bastion: { host: "b", privateKeySecret: "bk" } })).hosts[0].connection;
    expect(c).toMatchObject({ hostKeyPolicy: "pinned", bastion: { hostKeyPolicy: "pinned" } });
    const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHn4bVX1nZt0G5u9i4S2o9pC1VjV1t2pA0v6tO3nB7hM";
    expect(issues(ssh({ hostKey: key, hostKeyPolicy: "trust-on-first-use" }))).toEqual([
      "gpuhost:hosts[0].connection.hostKeyPolicy: is trust-on-first-use, but hostKey is set: a set hostKey is always enforced (drop one of the two)",
    ]);
    expect(issues(ssh({ hostKeyPolicy: "accept" }))[0]).toMatch(/^gpuhost:hosts\[0\]\.connection\.hostKeyPolicy: /);
    expect(
      issues(
        ssh({ bastion: { host: "b", privateKeySecret: "bk", hostKey: key, hostKeyPolicy: "insecure-accept-any" } }),
      ),
    ).toEqual([
      "gpuhost:hosts[0].connection.bastion.hostKeyPolicy: is insecure-accept-any, but hostKey is set: a set hostKey is always enforced (drop one of the two)",
    ]);
  });

  it("errors carry the config path inside lists", () => {
    const out = issues({ hosts: [{ name: "ok", connection: { kind: "ssh", host: "h", port: 0 } }] });
    expect(out).toEqual(["gpuhost:hosts[0].connection.port: Too small: expected number to be >=1"]);
    expect(configPath(["hosts", 2, "gpus", "count"])).toBe("gpuhost:hosts[2].gpus.count");
  });

  it("rejects a user name with spaces, for the service user and the SSH user", () => {
    const out = issues({
      hosts: [{ name: "h", connection: { kind: "ssh", host: "h", user: "root user" } }],
      environment: { serviceUser: "sg lang" },
    });
    expect(out).toHaveLength(2);
    expect(out[0]).toMatch(/^gpuhost:hosts\[0\]\.connection\.user: /);
    expect(out[1]).toMatch(/^gpuhost:environment\.serviceUser: must be a plain system user name/);
  });

  it("rejects shell metacharacters where values are not quotable (paths, hosts, parsers)", () => {
    const out = issues({
      hosts: [{ name: "h", connection: { kind: "ssh", host: "h; touch /tmp/pwned" } }],
      environment: { venvPath: "/opt/x; touch /tmp/pwned", jitCacheBase: "/var/$(id)" },
      services: { reasoningParser: "kimi_k2 --evil" },
    });
    expect(out.map((l) => l.split(":").slice(0, 2).join(":"))).toEqual([
      "gpuhost:hosts[0].connection.host",
      "gpuhost:environment.venvPath",
      "gpuhost:environment.jitCacheBase",
      "gpuhost:services.reasoningParser",
    ]);
  });

  it("accepts a hostile model path as data (it is quoted for systemd, see test/services) but not a newline", () => {
    expect(parseConfig({ ...sim, services: { modelPath: "x; touch /tmp/pwned" } }).services.modelPath).toBe(
      "x; touch /tmp/pwned",
    );
    expect(issues({ ...sim, services: { modelPath: "x\nExecStartPre=/bin/touch /tmp/pwned" } })).toEqual([
      "gpuhost:services.modelPath: modelPath must not contain control characters (newlines, tabs)",
    ]);
  });

  it("a CUDA release the catalogue does not hold is refused by the schema, at its path, naming the releases it holds", () => {
    // Before, 99.9 passed the schema and failed later in toolkitPlan with a bare Error (a stack trace).
    expect(issues({ ...sim, toolkit: { release: "99.9" } })).toEqual([
      `gpuhost:toolkit.release: 99.9 is not a CUDA release of components/cuda-catalog/cuda.yaml (it holds: ${toolkitReleases().join(", ")})`,
    ]);
    expect(parseConfig({ ...sim, toolkit: { release: toolkitReleases()[0] } }).toolkit.release).toBe(
      toolkitReleases()[0],
    );
  });

  it("free text that reaches a unit file or argv is bounded: a 100 kB value is refused at its path, not by the kernel at up (E2BIG)", () => {
    const huge = "m".repeat(100_000);
    const out = issues({
      ...sim,
      services: {
        modelPath: huge,
        servedModelName: huge,
        eagle3: { draftModelPath: huge },
      },
      environment: { venvPath: `/${huge}`, pipIndexUrl: `https://example.invalid/${huge}` },
      toolkit: { repository: { url: `https://example.invalid/${huge}` } },
    });
    expect(out.map((l) => l.split(": ")[0])).toEqual([
      "gpuhost:toolkit.repository.url",
      "gpuhost:environment.venvPath",
      "gpuhost:environment.pipIndexUrl",
      "gpuhost:services.modelPath",
      "gpuhost:services.servedModelName",
      "gpuhost:services.eagle3.draftModelPath",
    ]);
    for (const line of out) expect(line).toMatch(/at most [0-9]+ characters|: must be 1-256 characters/);
  });

  it("servedModelName: what SGLang's --served-model-name and an HTTP model field carry plainly, or refused at its path", () => {
    for (const ok of ["moonshotai/Kimi-K2.6", "kimi-k2.6", "Qwen/Qwen3-8B:fp8", "my_model@v2+eagle"])
      expect(parseConfig({ ...sim, services: { servedModelName: ok } }).services.servedModelName).toBe(ok);
    for (const bad of ["kimi k2", 'a"b', "-starts-with-a-dash", "x".repeat(257), "$(id)"])
      expect(issues({ ...sim, services: { servedModelName: bad } })).toEqual([
        expect.stringMatching(
          /^gpuhost:services\.servedModelName: must be 1-256 characters of letters, digits and \._:\/@\+-/,
        ),
      ]);
  });

  it("names unknown keys at their own path", () => {
    expect(issues({ ...sim, services: { prot: 1 }, bogus: true })).toEqual([
      "gpuhost:services.prot: unknown key",
      "gpuhost:bogus: unknown key",
    ]);
  });

  it("verification.answers: the shipped set by default, a threshold in [0, 1], a team's file that must exist and parse, at its path", () => {
    expect(parseConfig(sim).verification.answers).toMatchObject({ file: "default", passThreshold: 0.85 });
    expect(issues({ ...sim, verification: { answers: { passThreshold: 1.5 } } })).toEqual([
      "gpuhost:verification.answers.passThreshold: Too big: expected number to be <=1",
    ]);
    const missing = issues({ ...sim, verification: { answers: { file: "/nonexistent/team.jsonl" } } });
    expect(missing).toHaveLength(1);
    expect(missing[0]).toMatch(
      /^gpuhost:verification\.answers\.file: cannot read the answer set \/nonexistent\/team\.jsonl: /,
    );
    expect(parseConfig({ ...sim, verification: { answers: { file: "none" } } }).verification.answers.file).toBe("none");
  });

  it("verification, benchmark and workload reject unknown keys and timer values Node cannot wait", () => {
    expect(
      issues({ ...sim, verification: { deadlineSecond: 5 }, benchmark: { errorBudgett: 0 }, workload: { host: 2 } }),
    ).toEqual([
      "gpuhost:verification.deadlineSecond: unknown key",
      "gpuhost:benchmark.errorBudgett: unknown key",
      "gpuhost:workload.host: unknown key",
    ]);
    const big = issues({
      ...sim,
      verification: { deadlineSeconds: 2147484 },
      benchmark: { requestTimeoutSeconds: 5e6 },
    });
    expect(big).toHaveLength(2);
    expect(big[0]).toMatch(/^gpuhost:verification\.deadlineSeconds: .*2147483/);
    expect(big[1]).toMatch(/^gpuhost:benchmark\.requestTimeoutSeconds: .*2147483/);
  });

  it("speculative settings: all three or none, block size agrees, active needs its section", () => {
    expect(issues({ ...sim, services: { eagle3: { draftModelPath: "d", numSteps: 3 } } })).toEqual([
      "gpuhost:services.eagle3: set all three of numSteps, eagleTopk and numDraftTokens, or none (SGLang rejects a partial set)",
    ]);
    expect(
      issues({
        ...sim,
        services: { dflash: { draftModelPath: "d", numSteps: 1, eagleTopk: 1, numDraftTokens: 8, blockSize: 16 } },
      }),
    ).toEqual(["gpuhost:services.dflash.blockSize: must equal numDraftTokens (8), got 16"]);
    expect(issues({ ...sim, services: { active: "eagle3" } })).toEqual([
      "gpuhost:services.active: active is 'eagle3' but services.eagle3 is not set",
    ]);
    const ok = parseConfig({
      ...sim,
      services: {
        active: "dflash",
        dflash: { draftModelPath: "d", numSteps: 1, eagleTopk: 1, numDraftTokens: 16, blockSize: 16 },
      },
    });
    expect(ok.services.dflash?.blockSize).toBe(16);
  });

  it("speculative settings SGLang 0.5.23 would silently replace are refused (its speculative_hook)", () => {
    expect(
      issues({ ...sim, services: { eagle3: { draftModelPath: "d", numSteps: 3, eagleTopk: 1, numDraftTokens: 8 } } }),
    ).toEqual([
      "gpuhost:services.eagle3.numDraftTokens: with eagleTopk 1 the draft is a chain: must be numSteps + 1 (4), got 8 (SGLang would replace it)",
    ]);
    // A tree (topk > 1) takes any draft-token count.
    const tree = { draftModelPath: "d", numSteps: 3, eagleTopk: 4, numDraftTokens: 8 };
    expect(parseConfig({ ...sim, services: { eagle3: tree } }).services.eagle3?.numDraftTokens).toBe(8);
    expect(
      issues({
        ...sim,
        services: { dflash: { draftModelPath: "d", numSteps: 2, eagleTopk: 4, numDraftTokens: 16, blockSize: 16 } },
      }),
    ).toEqual([
      "gpuhost:services.dflash.numSteps: DFlash drafts one block per step: must be 1, got 2 (SGLang would replace it)",
      "gpuhost:services.dflash.eagleTopk: DFlash drafts one block per step: must be 1, got 4 (SGLang would replace it)",
    ]);
  });

  it("services.reasoningParser and toolCallParser: only the pinned SGLang's choices", () => {
    const [reasoning, tool] = issues({ ...sim, services: { reasoningParser: "kimi-k2", toolCallParser: "kimi" } });
    expect(reasoning).toMatch(
      /^gpuhost:services\.reasoningParser: must be one of the pinned SGLang's choices: .*kimi_k2/,
    );
    expect(tool).toMatch(/^gpuhost:services\.toolCallParser: must be one of the pinned SGLang's choices: .*kimi_k2/);
  });

  it("services.active auto picks by measurement: it needs services.compare", () => {
    expect(issues({ ...sim, services: { active: "auto" } })).toEqual([
      "gpuhost:services.active: active 'auto' picks the service by measurement: set services.compare: true",
    ]);
    expect(issues({ ...sim, services: { active: "best" } })[0]).toMatch(/^gpuhost:services\.active: /);
    expect(issues({ ...sim, services: { compare: "yes" } })[0]).toMatch(/^gpuhost:services\.compare: /);
    const auto = parseConfig({ ...sim, services: { active: "auto", compare: true } });
    expect(auto.services.active).toBe("auto");
    expect(parseConfig(sim).services.compare).toBe(false);
  });

  it("binding beyond loopback requires an API key; the key's characters are restricted", () => {
    expect(issues({ ...sim, services: { host: "0.0.0.0" } })[0]).toMatch(
      /^gpuhost:apiKey: services.host 0.0.0.0 exposes the API/,
    );
    expect(parseConfig({ ...sim, services: { host: "0.0.0.0" }, apiKey: KEY }).apiKey).toBe(KEY);
    expect(issues({ ...sim, apiKey: "short" })[0]).toMatch(/^gpuhost:apiKey: must be 16-256/);
    expect(issues({ ...sim, apiKey: `${KEY}'; touch /tmp/pwned` })[0]).toMatch(/^gpuhost:apiKey: /);
  });

  it("duplicate host names and a tp larger than the GPUs are errors", () => {
    const h = { name: "a", connection: { kind: "local" }, gpus: { count: 4 } };
    expect(issues({ hosts: [h, h], services: { tp: 8 } })).toEqual([
      "gpuhost:services.tp: tp 8 needs 8 GPUs; host 'a' has 4",
      "gpuhost:hosts[1].name: duplicate host name 'a'",
      "gpuhost:services.tp: tp 8 needs 8 GPUs; host 'a' has 4",
    ]);
  });

  it("a simulated host lives under .gpuhost/sim-hosts/<name> of the project by default", () => {
    const c = parseConfig(sim);
    expect(simulatedRoot(c.hosts[0], "/srv/gpuhost")).toBe("/srv/gpuhost/.gpuhost/sim-hosts/sim-1");
    // The simulated platform's connection: a local one under that folder, its shims first on PATH.
    expect(hostConnection(c.hosts[0], "/srv/gpuhost", () => "unused")).toEqual({
      kind: "local",
      root: "/srv/gpuhost/.gpuhost/sim-hosts/sim-1",
      toolsDir: "sim-host/bin",
    });
  });

  it("an SSH host's private key comes from the secret key it names, never from the object", () => {
    const c = parseConfig({ hosts: [{ name: "t", connection: { kind: "ssh", host: "127.0.0.1", port: 2222 } }] });
    const asked: string[] = [];
    const conn = hostConnection(c.hosts[0], "/p", (k) => {
      asked.push(k);
      return "KEY";
    });
    expect(asked).toEqual(["sshPrivateKey"]);
    expect(conn).toMatchObject({ kind: "ssh", host: "127.0.0.1", port: 2222, user: "root", privateKey: "KEY" });
  });

  it.each(["sim", "testhost"])("the committed %s stack is valid", (stack) => {
    expect(() => parseConfig(stackConfig(stack))).not.toThrow();
  });

  it("the committed story stack is valid, and needs an API key only once it binds beyond loopback", () => {
    const c = parseConfig(stackConfig("story"));
    expect(c.services.host).toBe("127.0.0.1");
    const exposed = stackConfig("story");
    (exposed.services as { host: string }).host = "0.0.0.0";
    expect(issues(exposed)[0]).toMatch(/^gpuhost:apiKey: /);
    expect(() => parseConfig({ ...exposed, apiKey: KEY })).not.toThrow();
    expect(c.services).toMatchObject({
      tp: 8,
      port: 30001,
      reasoningParser: "kimi_k2",
      toolCallParser: "kimi_k2",
      trustRemoteCode: true,
    });
    expect(c.hosts[0].gpus).toMatchObject({ count: 8, computeCapability: "12.0" });
    expect(c.services.eagle3).toBeDefined();
    expect(c.services.dflash).toBeDefined();
  });
});
