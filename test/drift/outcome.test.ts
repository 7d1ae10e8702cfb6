// gpuhost drift's exit statuses: 0 clean, 1 drift, and each kind of failure its own (issue 27.1).
// The engine's answers below are what pulumi v3.276.0 printed and exited with when measured (a
// missing stack: 6; a missing or wrong passphrase: 1 with the secrets manager's message; drift
// under --expect-no-changes: 7); driftMain runs them through a stand-in engine (mocked: the tests
// say so), the real engine's answers are test/engine/drift-textfile.test.ts's.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { DRIFT, driftMain } from "../../cli/drift";
import { DRIFT_OUTCOMES, engineFailure } from "../../components/drift/outcome";
import { TOOLKIT_STATE_TYPE } from "../../components/drift/report";
import type { EngineResult } from "../../engine/pulumi";

const NO_STACK = "error: no stack named 'nosuch' found\n";
const WRONG_PASSPHRASE = "error: getting stack configuration: get stack secrets manager: incorrect passphrase\n";
const NO_PASSPHRASE =
  "error: getting stack configuration: get stack secrets manager: passphrase must be set with PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE environment variables\n";
// pkg/backend/diy's lock check (not measured: a preview-only refresh takes no lock on the file backend)
const LOCKED =
  "error: the stack is currently locked by 1 lock(s). Either wait for the other process(es) to end or delete the lock file with `pulumi cancel`.\n";

const urn = "urn:pulumi:prod::gpuhost::gpuhost:index:GpuServingHost$" + TOOLKIT_STATE_TYPE + "::gpu1-toolkit-state";
const ev = (o: object) => JSON.stringify(o);
const refresh = (opts: { drift?: boolean; hostError?: boolean; result?: string }): string =>
  [
    ev({ preludeEvent: { config: {} } }),
    ev({
      resourcePreEvent: {
        metadata: { op: "refresh", urn, type: TOOLKIT_STATE_TYPE, old: { outputs: { hostLabel: "ssh root@gpu1:22" } } },
      },
    }),
    opts.hostError
      ? ev({ diagnosticEvent: { urn, message: "toolkit probe exited 255: Connection refused", severity: "error" } })
      : ev({
          resOutputsEvent: {
            metadata: {
              op: opts.drift ? "update" : "same",
              urn,
              type: TOOLKIT_STATE_TYPE,
              new: {
                outputs: {
                  hostLabel: "ssh root@gpu1:22",
                  drift: opts.drift
                    ? [
                        {
                          field: "packages.libcurand-dev-13-0",
                          expected: "10.4.0.35-1",
                          found: null,
                          repair: "pulumi up",
                        },
                      ]
                    : [],
                },
              },
            },
          },
        }),
    ev({ summaryEvent: { result: opts.result ?? "succeeded", resourceChanges: {} } }),
  ].join("\n");

/** gpuhost drift against a stand-in engine answering ANSWER: its exit status and what it printed. */
async function run(answer: EngineResult | Error, argv: string[] = ["--stack", "prod"]) {
  let out = "";
  let err = "";
  const code = await driftMain(argv, {
    out: (t) => void (out += t),
    err: (t) => void (err += t),
    runPulumi: () => (answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer)),
  });
  return { code, out, err };
}

describe("the engine's exit status and stderr to gpuhost drift's outcome (engineFailure)", () => {
  it.each([
    [0, "", undefined],
    [7, "error: no changes were expected for refresh but changes were proposed", undefined],
    [1, "", undefined],
    [6, NO_STACK, "no-stack"],
    [1, NO_STACK, "no-stack"],
    [1, WRONG_PASSPHRASE, "auth"],
    [1, NO_PASSPHRASE, "auth"],
    [3, "error: unauthorized", "auth"],
    [255, LOCKED, "locked"],
    [1, "error: [409] Conflict: Another update is currently in progress.", "locked"],
    [8, "", "interrupted"],
    [9, "", "timeout"],
    [255, "panic: runtime error", undefined],
  ])("exit %i with %j: %s", (code, stderr, kind) => {
    expect(engineFailure(code, stderr)).toBe(kind);
  });
});

describe("gpuhost drift's exit status for each ending, with the engine's recorded answers (stand-in engine)", () => {
  it.each([
    ["clean", { code: 0, stdout: refresh({}), stderr: "" }, 0],
    ["drift (the engine exits 7)", { code: 7, stdout: refresh({ drift: true }), stderr: "" }, 1],
    ["a host not probed", { code: 1, stdout: refresh({ hostError: true, result: "failed" }), stderr: "" }, 10],
    ["an engine that failed after clean events", { code: 255, stdout: refresh({}), stderr: "panic: boom" }, 11],
    ["an engine that printed no events", { code: 1, stdout: "", stderr: "error: could not load plugin" }, 11],
    ["no such stack", { code: 6, stdout: "", stderr: NO_STACK }, 12],
    ["a wrong passphrase", { code: 1, stdout: "", stderr: WRONG_PASSPHRASE }, 13],
    ["no passphrase", { code: 1, stdout: "", stderr: NO_PASSPHRASE }, 13],
    ["a locked stack", { code: 255, stdout: "", stderr: LOCKED }, 14],
    ["an engine that timed out", { code: 9, stdout: "", stderr: "" }, 15],
    ["an engine cancelled", { code: 8, stdout: "", stderr: "" }, 130],
  ] as const)("%s: exit %i", async (_, answer, expected) => {
    const r = await run({ ...answer });
    expect(r.code, r.out + r.err).toBe(expected);
  });

  it("an engine that cannot start: exit 11 with the reason", async () => {
    const r = await run(new Error(".gpuhost/engine/bin/pulumi is missing: run `npm run setup`"));
    expect(r.code).toBe(11);
    expect(r.out).toContain("error: .gpuhost/engine/bin/pulumi is missing");
  });

  it("a stack the backend does not hold (stackExists): exit 12 with how to bring it up", async () => {
    let err = "";
    const code = await driftMain(["--stack", "prod"], {
      out: () => undefined,
      err: (t) => void (err += t),
      stackAccess: (stack) => Promise.resolve({ stack, embedded: false, opts: {}, problem: undefined }),
      runPulumi: () => Promise.resolve({ code: 6, stdout: "", stderr: NO_STACK }),
      stackExists: () => Promise.resolve(false),
      pendingOperations: () => Promise.resolve([]),
    });
    expect(code).toBe(12);
    expect(err).toContain("stack prod has not been brought up");
  });

  it("a stack whose passphrase is not set (stackAccess's refusal): exit 13; no stack selected: exit 2", async () => {
    const refused = (stack: string | undefined) =>
      driftMain(stack ? ["--stack", stack] : [], {
        out: () => undefined,
        err: () => undefined,
        stackAccess: (s) => Promise.resolve({ stack: s, embedded: false, opts: {}, problem: "no passphrase is set" }),
        runPulumi: () => Promise.reject(new Error("not reached")),
      });
    expect(await refused("prod")).toBe(13);
    expect(await refused(undefined)).toBe(2);
  });

  it("an unexpected error in the check is its failure (exit 11), not drift's 1", async () => {
    const code = await driftMain(["--stack", "prod"], {
      out: () => undefined,
      err: () => undefined,
      stackAccess: () => Promise.reject(new Error("backend unreadable")),
      runPulumi: () => Promise.reject(new Error("not reached")),
    });
    expect(code).toBe(11);
  });

  it("every failure has its own status, none 0 or 1; --help and cli/README.md list each", async () => {
    const codes = Object.entries(DRIFT_OUTCOMES).map(([, o]) => o.code);
    expect(new Set(codes).size).toBe(codes.length);
    for (const [kind, { code }] of Object.entries(DRIFT_OUTCOMES))
      if (kind !== "clean" && kind !== "drift") expect(code, kind).toBeGreaterThan(1);
    let help = "";
    await driftMain(["--help"], { out: (t) => void (help += t) });
    const readme = fs.readFileSync(path.join(__dirname, "..", "..", "cli", "README.md"), "utf8");
    const table = readme.slice(readme.indexOf("## `gpuhost drift`"));
    for (const [code, meaning] of DRIFT.exits) {
      expect(help).toContain(`${code} ${meaning}`);
      expect(table, `cli/README.md's gpuhost drift table, status ${code}`).toMatch(
        new RegExp(`^\\| ${code} +\\|`, "m"),
      );
    }
  });
});

describe("--repair on a stack a dead process left locked (stand-in engine)", () => {
  it("does not run the update, which would only fail on the lock: it names the lock and pulumi cancel, and uses no repair", async () => {
    const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-drift-deadlock-"));
    const ran: string[][] = [];
    let err = "";
    let out = "";
    try {
      const code = await driftMain(["--stack", "prod", "--repair", "--json"], {
        out: (t) => void (out += t),
        err: (t) => void (err += t),
        stateDir,
        runPulumi: (args) => {
          ran.push(args);
          return Promise.resolve({ code: 7, stdout: refresh({ drift: true }), stderr: "" });
        },
        stackLocks: () => [],
        deadLocks: () => [{ file: "/x/lock.json", pid: 4242, username: "ops", hostname: "build-1" }],
      });
      expect(code, out + err).toBe(1);
      expect(ran.map((a) => a[0])).toEqual(["refresh"]);
      expect(err).toMatch(/not repaired: stack prod is locked by a process that is gone \(pid 4242/);
      expect(err).toContain("pulumi cancel");
      expect((JSON.parse(out) as { repair: unknown }).repair).toMatchObject({
        ran: false,
        held: "dead-lock",
        today: 0,
      });
    } finally {
      fs.rmSync(stateDir, { recursive: true, force: true });
    }
  });
});
