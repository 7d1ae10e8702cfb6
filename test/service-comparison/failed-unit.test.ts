/**
 * A speculative service that crashes on start, under the comparison, on a simulated host (its
 * systemctl and journalctl, activate.sh as the comparison runs it; nothing mocked): the gate ends as
 * soon as systemd reports the unit restarted or failed, naming the unit, its state and its last
 * journal lines, far inside its 1,800 s deadline (before, it waited for a port no process would
 * open); and the comparison leaves no unit it started "failed" (the drift probe then read "expected
 * inactive, found failed" on every later `up`). A failed unit it did not start is named, not reset.
 */
import { BenchPlanSchema } from "../../gate/base/schema";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, expect, it, vi } from "vitest";
import { create } from "../../components/service-comparison/provider";
import { execOnHost } from "../../components/host/exec";
import { freeLocalPort } from "../../ports";
import { prepareSimulatedHost, simulatedConnection } from "../../sim-host/platform";

const UNITS = ["sglang-autoregressive.service", "sglang-eagle3.service", "sglang-dflash.service"];
let root: string;
const sh = async (cmd: string) => {
  const r = await execOnHost(simulatedConnection(root), cmd, [], { timeoutMs: 60_000 });
  return r.stdout.trim();
};
const states = async () =>
  (await sh(`for u in ${UNITS.join(" ")}; do echo "$(systemctl is-active "$u" || true)"; done`)).split("\n");

/**
 * A unit like the rendered ones (Restart=on-failure, a start limit): `crash` makes its process die
 * during the load the way SGLang does when the weights do not fit, before it opens its port.
 */
function unit(name: string, crash: boolean): void {
  const others = UNITS.filter((u) => u !== name).join(" ");
  fs.writeFileSync(
    path.join(root, "etc/systemd/system", name),
    `[Unit]\nConflicts=${others}\nStartLimitIntervalSec=3600\nStartLimitBurst=2\n[Service]\nType=simple\n` +
      `Environment=CRASH=${crash ? 1 : ""}\nExecStart=/opt/app/serve\nRestart=on-failure\nRestartSec=1\n` +
      `[Install]\nWantedBy=multi-user.target\n`,
  );
}

beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-compare-failed-"));
  prepareSimulatedHost(root);
  fs.mkdirSync(path.join(root, "opt/app"), { recursive: true });
  fs.writeFileSync(
    path.join(root, "opt/app/serve"),
    '#!/bin/bash\necho "Load weight begin."\n[ -n "${CRASH:-}" ] && { echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."; exit 1; }\nexec sleep 300\n',
    { mode: 0o755 },
  );
});
afterEach(async () => {
  await sh(`systemctl stop ${UNITS.join(" ")}`);
  fs.rmSync(root, { recursive: true, force: true });
});

async function compare(port: number, serviceKinds: string[]) {
  return create({
    providerVersion: "2",
    connection: simulatedConnection(root),
    // Nothing ever listens here: only the unit's state can end the wait before the deadline.
    endpoint: { url: `http://127.0.0.1:${port}`, model: "tiny" },
    stamps: { autoregressive: "a".repeat(64), eagle3: "b".repeat(64), dflash: "c".repeat(64) },
    serviceKinds,
    drafts: { eagle3: { algorithm: "EAGLE3", draftModelPath: "d", acceptanceFloor: 1.5 } },
    // The gate's default deadline (1,800 s) stands; the comparison's own bounds this test if it waits.
    plan: {
      plan: BenchPlanSchema.parse({ concurrency: [1], requestsPerConcurrency: 1, repeats: 1 }),
      // What the stack's config gives (the provider decodes its inputs as the engine's check does).
      timeScale: 1,
      job: {},
      acceptanceFloor: 1.5,
      auto: false,
      restore: "autoregressive",
      verifyPolicy: {},
    },
    activateTimeoutSeconds: 60,
    deadlineSeconds: 90,
  });
}

it("a speculative unit that crashes on start: its gate names it within seconds, and it is not left failed", async () => {
  unit("sglang-autoregressive.service", false);
  unit("sglang-eagle3.service", true);
  unit("sglang-dflash.service", false);
  const t0 = performance.now();
  const err = await compare(await freeLocalPort(), ["eagle3"]).then(
    () => new Error("the comparison passed"),
    (e: unknown) => e as Error,
  );
  const seconds = (performance.now() - t0) / 1000;
  expect(err.message).toMatch(/no service could be measured: eagle3: not ready/);
  expect(err.message).toMatch(/the service unit sglang-eagle3\.service (failed|restarted \d+ time\(s\))/);
  expect(err.message).toMatch(/service sglang-eagle3\.service: ActiveState=(failed|activating)/);
  expect(err.message).toContain("--- last service log lines of sglang-eagle3.service ---");
  expect(err.message).toContain("torch.OutOfMemoryError: CUDA out of memory");
  expect(seconds).toBeLessThan(45);
  // The configured service is back; the one the comparison started and left is inactive, not failed.
  expect(await states()).toEqual(["active", "inactive", "inactive"]);
}, 120_000);

it("a unit that failed before the comparison and that it does not start is named, not reset", async () => {
  unit("sglang-autoregressive.service", false);
  unit("sglang-eagle3.service", true);
  unit("sglang-dflash.service", true);
  await sh("systemctl start sglang-dflash.service");
  for (let i = 0; i < 100 && (await states())[2] !== "failed"; i++) await new Promise((r) => setTimeout(r, 100));
  expect((await states())[2]).toBe("failed");
  const lines: string[] = [];
  // Captures the provider's progress lines (its stderr, which `pulumi up` shows) as well as writing them.
  const write = process.stderr.write.bind(process.stderr);
  const spy = vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
    lines.push(String(chunk));
    return write(chunk);
  });
  try {
    // It measures eagle3 (which crashes again: the comparison ends within seconds) and never starts dflash.
    await expect(compare(await freeLocalPort(), ["eagle3"])).rejects.toThrow(/no service could be measured/);
  } finally {
    spy.mockRestore();
  }
  expect(await states()).toEqual(["active", "inactive", "failed"]);
  expect(lines.join("")).toContain(
    "sglang-dflash.service is failed and this comparison did not start it (left as it is): journalctl -u sglang-dflash.service",
  );
}, 150_000);
