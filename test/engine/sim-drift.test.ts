/**
 * Drift on a simulated host, under the real engine, repaired by the next plain `pulumi up`.
 *
 * One throwaway stack (test/support/stack.ts: a copy of stacks/Pulumi.sim.yaml in a temp project
 * whose main is this checkout's dist/index.js, a throwaway state dir; plus its own free port, its
 * own simulated host folder and a secret API key), driven in sequence: up (gate passes), up again (nothing changes), then for
 * each kind of drift made on the host through the host layer's shims: `pulumi refresh
 * --preview-only --expect-no-changes` fails and `gpuhost drift --json` names the field; `pulumi up`
 * repairs the host (package, link, unit, header back) and a further `up` changes nothing. Finally
 * destroy leaves no simulator listening and no unit files. Nothing is mocked.
 */
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EngineResult, PROJECT_ROOT } from "../../engine/pulumi";
import { execOnHost } from "../../components/host/exec";
import { simulatedConnection } from "../../sim-host/platform";
import { acceptsConnections as isListening, freeLocalPort as freePort } from "../../ports";
import type { StackOutputs } from "../../stack/outputs";
import { driftJson, type StateExport } from "../support/engine";
import { createTestStack, type TestStack, disposeStack } from "../support/stack";
import { simHostRoot } from "../support/sim-stack";

const hostRoot = simHostRoot("drift");
const apiKey = `sim-drift-${randomBytes(16).toString("hex")}`;
const host = simulatedConnection(hostRoot);

const UNIT_DIR = "/etc/systemd/system";
const ACTIVE = "sglang-autoregressive.service";
const UNITS = ["sglang-autoregressive.service", "sglang-eagle3.service", "sglang-dflash.service"];
const CURAND_H = "/usr/local/cuda-13.0/include/curand.h";
let port = 0;
let stack: TestStack | undefined;

async function ok(args: string[]): Promise<EngineResult> {
  const r = await stack!.run(...args);
  if (r.code !== 0)
    throw new Error(`pulumi ${args.join(" ")} exited ${r.code}\n${r.stdout.slice(-6000)}\n${r.stderr.slice(-3000)}`);
  return r;
}

/** The events of `pulumi up --json` this test reads. */
interface UpEvent {
  summaryEvent?: { result: string; resourceChanges: Record<string, number> };
  resOutputsEvent?: {
    metadata?: {
      op: string;
      urn: string;
      type?: string;
      diffs?: string[];
      new?: { outputs?: Record<string, unknown> };
    };
  };
}

/**
 * `pulumi up --json`: the streamed events' summary, e.g. { same: 16, update: 1 }, what changed
 * (resource name and the keys its diff named) so a failed expectation says why, and the stack's
 * outputs as the up left them (what `pulumi stack output --json` would print, without a command of
 * its own).
 */
async function up(): Promise<{ changes: Record<string, number>; changed: string[]; outputs: StackOutputs }> {
  const r = await ok(["up", "--yes", "--skip-preview", "--json"]);
  const events = r.stdout
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as UpEvent);
  const summary = events.find((e) => e.summaryEvent)?.summaryEvent;
  if (!summary) throw new Error(`pulumi up printed no summary:\n${r.stdout.slice(-3000)}`);
  expect(summary.result).toBe("succeeded");
  const metadata = events.map((e) => e.resOutputsEvent?.metadata).filter((m): m is NonNullable<typeof m> => !!m);
  const changed = metadata
    .filter((m) => !["same", "refresh", "read"].includes(m.op))
    .map((m) => `${m.op} ${m.urn.slice(m.urn.lastIndexOf("::") + 2)} [${(m.diffs ?? []).join(",")}]`);
  const outputs = metadata.filter((m) => m.type === "pulumi:pulumi:Stack").at(-1)?.new?.outputs;
  if (!outputs) throw new Error(`pulumi up printed no stack outputs:\n${r.stdout.slice(-3000)}`);
  return { changes: summary.resourceChanges, changed, outputs: outputs as unknown as StackOutputs };
}

/** `gpuhost drift --json` for this stack (the real refresh), and the refresh's own exit status. */
const driftReport = () => driftJson(stack!.stack, stack!.opts);

async function onHost(script: string): Promise<string> {
  const r = await execOnHost(host, `set -euo pipefail\n${script}`, [], { timeoutMs: 120_000 });
  if (r.code !== 0) throw new Error(`host script failed (${r.code}): ${r.stderr}`);
  return r.stdout;
}

/** What the drift checks compare: the package, the link, the header, the unit files, the services. */
async function hostFacts() {
  const out = await onHost(`
    dpkg-query -W -f='\${Version}\\n' libcurand-dev-13-0 2>/dev/null | sed 's/^/pkg=/' || echo pkg=
    echo "link=$(readlink -f "$GPUHOST_ROOT/usr/local/cuda")"
    echo "curand=$(sha256sum <"$GPUHOST_ROOT${CURAND_H}" | cut -d' ' -f1)"
    for u in ${UNITS.join(" ")}; do
      echo "unit.$u=$(sha256sum <"$GPUHOST_ROOT${UNIT_DIR}/$u" | cut -d' ' -f1)"
      echo "active.$u=$(systemctl is-active "$u" || true)"
    done
    echo "pid=$(systemctl show -p MainPID --value ${ACTIVE})"
    echo "keyfile=$(stat -c %a "$GPUHOST_ROOT/etc/gpuhost/sglang-api-key.yaml" 2>/dev/null) $(grep -c "${apiKey}" "$GPUHOST_ROOT/etc/gpuhost/sglang-api-key.yaml" 2>/dev/null)"`);
  const kv = Object.fromEntries(
    out
      .trim()
      .split("\n")
      .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
  );
  return { ...kv, link: kv.link.slice(hostRoot.length) } as Record<string, string>;
}

/** The HTTP status of /v1/models asked with KEY: 200 when the service runs with it, 401 with another. */
async function modelsStatus(key: string): Promise<number> {
  const r = await fetch(`http://127.0.0.1:${port}/v1/models`, {
    headers: { Authorization: `Bearer ${key}` },
    signal: AbortSignal.timeout(10_000),
  });
  await r.body?.cancel();
  return r.status;
}

const KEY_FILE = "/etc/gpuhost/sglang-api-key.yaml";
/** Write FILE as api-key-file.sh would, with another key (a second stack writing to the host). */
const otherKeyFile = `printf '# another stack\\napi-key: "%s"\\n' other-key-${"x".repeat(8)} >"$GPUHOST_ROOT${KEY_FILE}"\nchmod 0600 "$GPUHOST_ROOT${KEY_FILE}"`;

beforeAll(async () => {
  port = await freePort();
  // The project file as it is (refresh: always included) running dist/index.js; the sim config.
  stack = await createTestStack(
    "sim",
    [
      { path: "gpuhost:services.port", value: String(port) },
      { path: "gpuhost:hosts[0].connection.root", value: hostRoot },
      { path: "gpuhost:apiKey", value: apiKey, secret: true },
    ],
    240_000,
  );
}, 120_000);

/** Set once the last test's destroy succeeded: then the stack's folder only has to go, not be destroyed again. */
let destroyed = false;

afterAll(() => (destroyed ? disposeStack(undefined, hostRoot, stack!.dir) : disposeStack(stack, hostRoot)), 300_000);

describe("drift on a simulated host under the real engine", () => {
  let clean: Record<string, string>;

  it("pulumi up provisions the host and the gate passes", async () => {
    const { changes, outputs } = await up();
    expect(changes.create).toBeGreaterThan(10);
    expect(outputs.gpuHosts["sim-1"].generating).toBe(true);
    expect(outputs.gpuHosts["sim-1"].drift).toEqual([]);
    expect(await isListening(port)).toBe(true);
    clean = await hostFacts();
    expect(clean.pkg).toBe("10.4.0.35-1");
    expect(clean.link).toBe("/usr/local/cuda-13.0");
    expect(clean[`active.${ACTIVE}`]).toBe("active");
    expect(clean["active.sglang-eagle3.service"]).toBe("inactive");
    // Everything the host got lies inside its folder: the venv at its default /opt/gpuhost/venv is
    // the host's, not the checkout's (the link to gpuhost's folder once sat at /opt/gpuhost).
    expect(fs.existsSync(path.join(hostRoot, "opt/gpuhost/venv/gpuhost-env.lock"))).toBe(true);
    expect(fs.lstatSync(path.join(hostRoot, "opt/gpuhost")).isSymbolicLink()).toBe(false);
    expect(fs.existsSync(path.join(PROJECT_ROOT, "venv"))).toBe(false);
  }, 180_000);

  it("a second pulumi up changes nothing", async () => {
    const second = await up();
    expect(second.changes, second.changed.join("; ")).toEqual({ same: expect.any(Number) as unknown });
  }, 120_000);

  it("the state holds the API key only encrypted, and ToolkitState carries its repair steps", async () => {
    const plain = (await ok(["stack", "export"])).stdout;
    expect(plain).not.toContain(apiKey);
    expect((await ok(["stack", "export", "--show-secrets"])).stdout).toContain(apiKey); // so the check above could fail
    const state = JSON.parse(plain) as StateExport;
    const toolkitState = state.deployment.resources.find((r) => r.urn.endsWith("::sim-1-toolkit-state"));
    const inputs = toolkitState!.inputs!;
    expect(inputs.onDrift).toBe("repair");
    const scripts = (inputs.repairs as { script: string }[]).map((s) => s.script);
    expect(scripts).toEqual([
      // The simulated platform's preparation first (the folder's repository the toolkit installs from).
      "sim-host/scripts/prepare.sh",
      "components/cuda-toolkit/scripts/repository.sh",
      "components/cuda-toolkit/scripts/install.sh",
      "components/cuda-toolkit/scripts/verify.sh",
      // the API key file first (its script, fed the key on stdin by ToolkitState): systemd cannot
      // start a unit whose credential file is missing, and a restart must load the rewritten key
      "components/services/scripts/api-key-file.sh",
      ...UNITS.map(() => "components/services/scripts/install-unit.sh"),
      "components/drift/scripts/restart-unit.sh",
      "components/services/scripts/activate.sh",
    ]);
  }, 60_000);

  /**
   * `restarts`: the repair restarts the service, so the same up verifies it again (issue 19.1:
   * VerifiedGeneration is replaced after ToolkitState's update, and passes).
   */
  const drifts: {
    kind: string;
    make: string;
    fields: string[];
    repaired: (f: Record<string, string>) => void;
    restarts?: true;
  }[] = [
    {
      kind: "libcurand-dev-13-0 removed",
      make: "apt-get remove -y libcurand-dev-13-0 >/dev/null",
      fields: ["packages.libcurand-dev-13-0", "packages.cuda-toolkit-13-0", `files.${CURAND_H}`],
      repaired: (f) => {
        expect(f.pkg).toBe(clean.pkg);
        expect(f.curand).toBe(clean.curand);
      },
    },
    {
      kind: "/usr/local/cuda pointed at 12.8",
      make: [
        "apt-get install -y cuda-toolkit-12-8 >/dev/null",
        "update-alternatives --install /usr/local/cuda cuda /usr/local/cuda-12.8 128 >/dev/null",
        "update-alternatives --set cuda /usr/local/cuda-12.8 >/dev/null",
      ].join("\n"),
      fields: ["cudaLink"],
      repaired: (f) => expect(f.link).toBe("/usr/local/cuda-13.0"),
    },
    {
      // Edited, reloaded and restarted by hand: the running service now has the edited environment.
      kind: "the active unit file edited",
      make: [
        `echo 'Environment=GPUHOST_DRIFT=edited' >>"$GPUHOST_ROOT${UNIT_DIR}/${ACTIVE}"`,
        "systemctl daemon-reload",
        `systemctl restart ${ACTIVE}`,
      ].join("\n"),
      fields: [`units.${UNIT_DIR}/${ACTIVE}.sha256`],
      restarts: true,
      repaired: (f) => {
        for (const u of UNITS) expect(f[`unit.${u}`], u).toBe(clean[`unit.${u}`]);
        // Restarted on the restored unit: the new main process no longer has the edited environment.
        expect(fs.readFileSync(`/proc/${f.pid}/environ`, "utf8").split("\0")).not.toContain("GPUHOST_DRIFT=edited");
      },
    },
    {
      kind: "the API key file deleted",
      make: `rm -f "$GPUHOST_ROOT/etc/gpuhost/sglang-api-key.yaml"`,
      fields: ["apiKeyFile"],
      repaired: (f) => expect(f.keyfile).toBe("600 1"),
    },
    {
      kind: "the active service stopped",
      make: `systemctl stop ${ACTIVE}`,
      fields: [`units.${UNIT_DIR}/${ACTIVE}.active`],
      restarts: true,
      repaired: () => undefined,
    },
    {
      // Issue 19.2: systemd cannot start the unit without its credential, so the file comes first.
      kind: "the API key file deleted and the unit restarted",
      make: `rm -f "$GPUHOST_ROOT${KEY_FILE}"\nsystemctl restart ${ACTIVE} || true`,
      fields: ["apiKeyFile", `units.${UNIT_DIR}/${ACTIVE}.active`],
      restarts: true,
      repaired: (f) => expect(f.keyfile).toBe("600 1"),
    },
    {
      // Issue 19.2: the service started with the other key; rewriting the file alone left it answering 401.
      kind: "the API key file changed and the unit restarted",
      make: `${otherKeyFile}\nsystemctl restart ${ACTIVE}`,
      fields: ["apiKeyFile", `units.${UNIT_DIR}/${ACTIVE}.apiKey`],
      restarts: true,
      repaired: (f) => expect(f.keyfile).toBe("600 1"),
    },
    {
      // The file is right again, but the process still runs with the key it started with: drift names it.
      kind: "the service running with another key while its file matches",
      make: [
        `cp -p "$GPUHOST_ROOT${KEY_FILE}" "$GPUHOST_ROOT${KEY_FILE}.keep"`,
        otherKeyFile,
        `systemctl restart ${ACTIVE}`,
        `mv "$GPUHOST_ROOT${KEY_FILE}.keep" "$GPUHOST_ROOT${KEY_FILE}"`,
      ].join("\n"),
      fields: [`units.${UNIT_DIR}/${ACTIVE}.apiKey`],
      restarts: true,
      repaired: (f) => expect(f.keyfile).toBe("600 1"),
    },
    {
      kind: "curand.h replaced",
      make: `rm -f "$GPUHOST_ROOT${CURAND_H}"\necho '/* a 12.8 header copied in */' >"$GPUHOST_ROOT${CURAND_H}"`,
      fields: [`files.${CURAND_H}`],
      repaired: (f) => expect(f.curand).toBe(clean.curand),
    },
  ];

  for (const drift of drifts) {
    it(`${drift.kind}: refresh --expect-no-changes fails naming it; pulumi up repairs the host; the next up changes nothing`, async () => {
      await onHost(drift.make);
      const { report, fields, pulumiCode } = await driftReport();
      expect(pulumiCode).not.toBe(0);
      expect(report.exitCode, JSON.stringify(report.errors)).toBe(1);
      expect(report.errors).toEqual([]);
      expect(fields).toEqual(expect.arrayContaining(drift.fields));

      const repair = await up();
      if (drift.restarts) {
        // The repair restarted the service: VerifiedGeneration verifies the new start in this same up.
        expect(repair.changes, repair.changed.join("; ")).toEqual({
          same: expect.any(Number) as unknown,
          update: 1,
          replace: 1,
        });
        expect(repair.changed).toEqual(
          expect.arrayContaining([
            expect.stringMatching(/^update sim-1-toolkit-state /),
            expect.stringMatching(/replace\S* sim-1-verified /),
          ]),
        );
        expect(repair.outputs.gpuHosts["sim-1"].generating).toBe(true);
      } else {
        expect(repair.changes, repair.changed.join("; ")).toEqual({ same: expect.any(Number) as unknown, update: 1 });
        expect(repair.changed).toEqual([expect.stringMatching(/^update sim-1-toolkit-state /)]);
      }
      const facts = await hostFacts();
      drift.repaired(facts);
      // Exactly the active service runs, answering on its port.
      expect(UNITS.map((u) => facts[`active.${u}`])).toEqual(["active", "inactive", "inactive"]);
      expect(await isListening(port)).toBe(true);
      // The service runs with the configured key.
      expect(await modelsStatus(apiKey)).toBe(200);

      // A refreshing up: right after some repairs (the CUDA link, the API key file) the state still
      // differs from what a refresh reads, and `refresh --preview-only` would exit 7 until an up refreshed it.
      const next = await up();
      expect(next.changes, next.changed.join("; ")).toEqual({ same: expect.any(Number) as unknown });
      const after = await driftReport();
      expect(after.report.exitCode, JSON.stringify(after.report)).toBe(0);
      expect(after.pulumiCode).toBe(0);
    }, 180_000);
  }

  it("pulumi destroy stops the simulator and removes the unit files", async () => {
    await ok(["destroy", "--yes", "--skip-preview"]);
    destroyed = true;
    expect(await isListening(port)).toBe(false);
    const units = fs.readdirSync(path.join(hostRoot, UNIT_DIR)).filter((f) => f.endsWith(".service"));
    expect(units).toEqual([]);
  }, 120_000);
});
