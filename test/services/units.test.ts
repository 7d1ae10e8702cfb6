import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { execStartArgv, sglangArgv } from "../../components/services/launch-args";
import { simulatorProgram } from "../../sim-host/platform";
import { quoteExecWord, renderExecLine } from "../../components/services/systemd-syntax";
import { fillTemplate, unitHash } from "../../components/services/unit";
import { stackConfig } from "../config/stacks";
import { API_KEY, unitsOf } from "./render";
import { systemdAnalyzeAvailable, verifyUnit } from "./systemd-analyze";

const GOLDEN = path.join(__dirname, "golden");

function golden(file: string, actual: string): void {
  const p = path.join(GOLDEN, file);
  if (process.env.UPDATE_GOLDEN === "1") fs.writeFileSync(p, actual);
  expect(actual, `golden ${file} (UPDATE_GOLDEN=1 rewrites it)`).toBe(fs.readFileSync(p, "utf8"));
}

const story = unitsOf("story");
const unit = (kind: string) => story.find((u) => u.kind === kind)!.content;

describe("rendered units: golden", () => {
  it.each(["autoregressive", "eagle3", "dflash"])("story host, %s", (kind) =>
    golden(`story-${kind}.service`, unit(kind)),
  );
  it("simulated host, autoregressive (the simulator as ExecStart, same structure)", () => {
    golden("sim-autoregressive.service", unitsOf("sim").find((u) => u.kind === "autoregressive")!.content);
  });
});

describe("rendered units: content", () => {
  it("renders exactly the configured services", () => {
    expect(story.map((u) => u.name)).toEqual([
      "sglang-autoregressive.service",
      "sglang-eagle3.service",
      "sglang-dflash.service",
    ]);
    expect(unitsOf("sim", { extra: { services: { modelPath: "m" } } }).map((u) => u.kind)).toEqual(["autoregressive"]);
  });

  it("each unit conflicts with the other services sharing the GPUs", () => {
    expect(unit("eagle3")).toMatch(/^Conflicts=sglang-autoregressive\.service sglang-dflash\.service$/m);
    expect(unit("autoregressive")).toMatch(/^Conflicts=sglang-eagle3\.service sglang-dflash\.service$/m);
  });

  it("pins the toolkit and the keyed JIT cache, allows a 10-minute load, restarts with limits, runs as the service user", () => {
    const u = unit("autoregressive");
    expect(u).toContain('"CUDA_HOME=/usr/local/cuda-13.0"');
    expect(u).toMatch(/"PATH=\/opt\/gpuhost\/venv\/bin:\/usr\/local\/cuda-13\.0\/bin:/);
    expect(u).toContain('"LD_LIBRARY_PATH=/usr/local/cuda-13.0/lib64"');
    expect(u).toMatch(/"FLASHINFER_WORKSPACE_BASE=\/var\/cache\/gpuhost\/flashinfer\/cuda13\.0-[0-9a-f]{16}"/);
    expect(u).toMatch(/^TimeoutStartSec=600$/m);
    expect(u).toMatch(/^Restart=on-failure$/m);
    expect(u).toMatch(/^StartLimitIntervalSec=3600$/m);
    expect(u).toMatch(/^StartLimitBurst=3$/m);
    expect(u).toMatch(/^User=sglang$/m);
    expect(u).toMatch(/^NoNewPrivileges=yes$/m);
    expect(u).not.toMatch(/^PrivateDevices=/m);
    expect(u).not.toMatch(/^MemoryDenyWriteExecute=/m);
  });

  it("the API key reaches SGLang as a credential file read with --config: never argv, environment or unit text", () => {
    const u = unit("autoregressive");
    expect(u).toMatch(/^LoadCredential=sglang-server-args\.yaml:\/etc\/gpuhost\/sglang-api-key\.yaml$/m);
    expect(u).toContain(" --config %d/sglang-server-args.yaml ");
    expect(u).not.toContain("--api-key");
    expect(u).not.toContain("EnvironmentFile=");
    expect(u).not.toContain(API_KEY);
    const none = unitsOf("sim", { apiKey: false })[0].content;
    expect(none).not.toContain("LoadCredential=");
    expect(none).not.toContain("--config");
  });

  it("binds 127.0.0.1 unless told otherwise", () => {
    expect(unitsOf("testhost")[0].content).toContain(" --host 127.0.0.1 --port 30000 ");
    expect(unit("autoregressive")).toContain(" --host 127.0.0.1 --port 30001 ");
    const exposed = unitsOf("story", {
      extra: { services: { ...(stackConfig("story").services as object), host: "0.0.0.0" } },
    });
    expect(exposed[0].content).toContain(" --host 0.0.0.0 --port 30001 ");
  });

  it("the unit hash changes with the unit text and with the environment, and only then", () => {
    const a = unit("autoregressive");
    expect(unitHash(a, "lock1")).toBe(unitHash(a, "lock1"));
    expect(unitHash(a, "lock2")).not.toBe(unitHash(a, "lock1"));
    expect(unitHash(`${a}#`, "lock1")).not.toBe(unitHash(a, "lock1"));
  });

  it("a template placeholder without a value, or a value without a placeholder, is an error", () => {
    expect(() => fillTemplate("{{a}} {{b}}", { a: "1" })).toThrow(/\{\{b\}\} has no value/);
    expect(() => fillTemplate("{{a}}", { a: "1", c: "2" })).toThrow(/no placeholder for: c/);
  });
});

describe("launch args", () => {
  const base = {
    modelPath: "/m",
    tp: 8,
    host: "127.0.0.1",
    port: 30001,
    trustRemoteCode: true,
    enableMetrics: false,
    reasoningParser: "kimi_k2",
    toolCallParser: "kimi_k2",
    memFractionStatic: 0.85,
  };
  it("autoregressive: each flag and value its own word", () => {
    expect(sglangArgv(base)).toEqual([
      "--model-path",
      "/m",
      "--trust-remote-code",
      "--host",
      "127.0.0.1",
      "--port",
      "30001",
      "--tp",
      "8",
      "--mem-fraction-static",
      "0.85",
      "--reasoning-parser",
      "kimi_k2",
      "--tool-call-parser",
      "kimi_k2",
    ]);
  });
  it("EAGLE3 and DFLASH flags", () => {
    const e = sglangArgv({
      ...base,
      speculative: { algorithm: "EAGLE3", draftModelPath: "/d", numSteps: 3, eagleTopk: 1, numDraftTokens: 4 },
    });
    expect(e.slice(-10)).toEqual([
      "--speculative-algorithm",
      "EAGLE3",
      "--speculative-draft-model-path",
      "/d",
      "--speculative-num-steps",
      "3",
      "--speculative-eagle-topk",
      "1",
      "--speculative-num-draft-tokens",
      "4",
    ]);
    const d = sglangArgv({ ...base, speculative: { algorithm: "DFLASH", draftModelPath: "/d", dflashBlockSize: 16 } });
    expect(d.slice(-6)).toEqual([
      "--speculative-algorithm",
      "DFLASH",
      "--speculative-draft-model-path",
      "/d",
      "--speculative-dflash-block-size",
      "16",
    ]);
  });
  it("the simulator runs SGLang's own flags through its stand-in sglang; profile, scale and faults in the environment", () => {
    const program = simulatorProgram(
      { profile: "tiny", serviceProfiles: {}, faults: ["jit-crash"], timeScale: 4 },
      { nodePath: "/usr/bin/node", gpuhostDir: "/p" },
    );
    const args = { ...base, apiKeyCredential: "sglang-server-args.yaml" };
    expect(execStartArgv(program.command, args)).toEqual([
      "/usr/bin/node",
      "/p/dist/simulator/sglang.js",
      ...sglangArgv(args),
    ]);
    expect(execStartArgv(program.command, args)).toContainEqual({ credential: "sglang-server-args.yaml" });
    expect(program.environment.autoregressive).toEqual([
      ["GPUHOST_SIM_PROFILE", "tiny"],
      ["GPUHOST_SIM_TIME_SCALE", "4"],
      ["GPUHOST_SIM_FAULTS", "jit-crash"],
    ]);
  });
  it("quoting: plain words stay plain, everything else is one double-quoted word", () => {
    expect(quoteExecWord("--tp")).toBe("--tp");
    expect(quoteExecWord("x; touch /tmp/pwned")).toBe('"x; touch /tmp/pwned"');
    expect(quoteExecWord('a"b\\c')).toBe('"a\\"b\\\\c"');
    expect(quoteExecWord("100% $HOME")).toBe('"100%% $$HOME"');
    expect(quoteExecWord("")).toBe('""');
    expect(quoteExecWord({ env: "SGLANG_API_KEY" })).toBe("${SGLANG_API_KEY}");
    expect(() => quoteExecWord({ env: "A B" })).toThrow();
    expect(() => renderExecLine(["python3", "-m"])).toThrow(/absolute path/);
  });
});

const HOSTILE = [
  "x; touch /tmp/pwned",
  "$(touch /tmp/pwned)",
  "`id`",
  "a\"b'c\\d",
  "%n %% 100%",
  "${HOME}$PATH",
  ";",
  "tab\there",
  "new\nline",
];

describe("systemd-analyze verify (systemd's own parser)", () => {
  it("systemd-analyze is installed (Debian: apt-get install -y systemd)", () =>
    expect(systemdAnalyzeAvailable()).toBe(true));
  const all = [
    ...story.map((u) => ({ label: `story ${u.kind}`, ...u })),
    ...unitsOf("sim").map((u) => ({ label: `sim ${u.kind}`, ...u })),
    ...unitsOf("testhost").map((u) => ({ label: `testhost ${u.kind}`, ...u })),
  ];
  it.each(all)(
    "$label: verifies with no warning, and systemd reads back the argv and environment we rendered",
    async (u) => {
      const r = await verifyUnit(u.name, u.content);
      expect(r.stderr).toBe("");
      expect(r.status).toBe(0);
      const line = /^ExecStart=(.*)$/m.exec(u.content)![1];
      expect(r.argv.length).toBeGreaterThan(5);
      // %d is the unit's credentials folder (systemd.unit(5) SPECIFIERS): systemd's parser says where.
      expect(r.argv.join(" ")).toBe(line.replace(/%d\//g, `/run/credentials/${u.name}/`).replace(/%%/g, "%"));
      expect(r.environment.some((e) => e === "CUDA_HOME=/usr/local/cuda-13.0")).toBe(true);
    },
  );

  it("really checks: a unit whose program is missing, or with a misspelt directive, fails", async () => {
    const u = story[0];
    expect((await verifyUnit(u.name, u.content, { stubProgram: false })).status).not.toBe(0);
    const typo = await verifyUnit(u.name, u.content.replace("TimeoutStartSec=", "TimeoutStartSecs="));
    expect(typo.stderr).toMatch(/Unknown key 'TimeoutStartSecs'/);
  });

  it("hostile model and draft paths each stay ONE argument, byte for byte, and add no directive", async () => {
    for (const hostile of HOSTILE) {
      const units = unitsOf("story", {
        extra: {
          services: {
            modelPath: hostile.includes("\n") || hostile.includes("\t") ? "ok" : hostile,
            servedModelName: "kimi",
            tp: 8,
            host: "0.0.0.0",
            eagle3: { draftModelPath: hostile.includes("\n") || hostile.includes("\t") ? "ok" : hostile },
          },
        },
      });
      // Control characters are refused by the schema; the quoting layer still escapes them.
      const direct = renderExecLine(["/bin/prog", "--model-path", hostile]);
      for (const [name, content] of [
        ...units.map((u) => [u.name, u.content] as const),
        ["direct.service", `[Service]\nExecStart=${direct}\n`] as const,
      ]) {
        const r = await verifyUnit(name, content);
        expect(r.status, `${name} ${JSON.stringify(hostile)}: ${r.stderr}`).toBe(0);
        const at = r.argv.indexOf("--model-path");
        const expected = name === "direct.service" || !/[\n\t]/.test(hostile) ? hostile : "ok";
        // systemd keeps `$$` in its dump and turns it into `$` when it runs the program.
        expect(r.argv[at + 1].replace(/\$\$/g, "$")).toBe(expected);
        expect(content.split("\n").filter((l) => l.startsWith("ExecStart"))).toHaveLength(1);
      }
    }
    // Dozens of systemd-analyze runs: about 1 s each alone, several on a loaded 2-core machine.
  }, 240_000);
});
