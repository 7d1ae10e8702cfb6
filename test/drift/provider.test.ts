// ToolkitState's provider methods (plain functions: the engine cannot run inside Vitest,
// pulumi#10480) against a simulated host provisioned through the host layer's shims. Each kind of
// drift is made on the host for real, then read + diff must name exactly the fields that drifted.
import { PULUMI_UNKNOWN } from "../../components/provider-helpers";
import { useSimulatedHosts } from "./sim-hosts-fixture";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import type { SimulatedConnection } from "../../sim-host/platform";
import * as impl from "../../components/drift/provider-impl";
import type { ToolkitStateInputs, ToolkitStateOutputs } from "../../components/drift/provider-impl";
import { TOOLKIT_STATE_PROVIDER_VERSION } from "../../components/drift/version";
import { expectedForSim, JIT_BASE, JIT_KEY, onHost, UNIT_FILE } from "./sim-host";

const host = useSimulatedHosts();

function inputs(conn: SimulatedConnection, extra: Partial<ToolkitStateInputs> = {}): ToolkitStateInputs {
  return {
    providerVersion: TOOLKIT_STATE_PROVIDER_VERSION,
    connection: conn,
    expected: expectedForSim(),
    onDrift: "fail",
    ...extra,
  };
}

/** create on the clean host, change it with `script`, then refresh the way the engine does: read, then diff(fresh props, stored inputs). */
async function driftAfter(script: string): Promise<{
  conn: SimulatedConnection;
  created: ToolkitStateOutputs;
  read: Awaited<ReturnType<typeof impl.read>>;
  changes: boolean;
}> {
  const conn = host();
  const { id, outs } = await impl.create(inputs(conn));
  await onHost(conn, script);
  const read = await impl.read(id, outs);
  const { changes } = await impl.diff(id, read.props, read.inputs);
  return { conn, created: outs, read, changes };
}

const fields = (props: ToolkitStateOutputs): string[] => props.drift.map((d) => d.field);

describe("ToolkitState provider on a simulated host", () => {
  it("a clean host: create records it, read finds no drift, diff reports no change", async () => {
    const conn = host();
    const { id, outs } = await impl.create(inputs(conn));
    expect(id).toMatch(/^toolkit-state-[0-9a-f]{16}$/);
    expect(outs.drift).toEqual([]);
    expect(outs.hostLabel).toBe(`local ${conn.root}`);
    expect(outs.observed.cudaHome.version).toBe("13.0");
    expect(outs.observed.cudaLink).toBe("/usr/local/cuda-13.0");
    expect(outs.observed.packages["libcurand-dev-13-0"]).toBe("10.4.0.35-1");
    expect(outs.observed.files["/usr/local/cuda-13.0/include/curand.h"]).toMatch(/^[0-9a-f]{64}$/);
    expect(outs.observed.jit.keys).toEqual([JIT_KEY]);
    expect(outs.observed.units[UNIT_FILE]).toMatchObject({ enabled: "enabled", active: "inactive" });
    const read = await impl.read(id, outs);
    expect(read.props.drift).toEqual([]);
    expect(read.props).toEqual(outs); // nothing time-dependent: a clean refresh changes nothing
    expect(await impl.diff(id, read.props, read.inputs)).toEqual({ changes: false, replaces: [] });
  });

  it("read returns the inputs unchanged beside the fresh props, so diffs after a refresh stay precise", async () => {
    const { read } = await driftAfter("apt-get remove -y libcurand-dev-13-0 >/dev/null");
    expect(Object.keys(read.inputs).sort()).toEqual(["connection", "expected", "onDrift", "providerVersion"]);
    expect(read.inputs.expected).toEqual(expectedForSim());
  });

  it("libcurand-dev-13-0 removed: exactly the package, what apt removed with it, and its files", async () => {
    const { conn, read, changes } = await driftAfter("apt-get remove -y libcurand-dev-13-0 >/dev/null");
    expect(changes).toBe(true);
    // apt removes what depends on the package too (the meta packages), as it does on a real host.
    expect(fields(read.props)).toEqual([
      "packages.cuda-libraries-dev-13-0",
      "packages.cuda-toolkit-13-0",
      "packages.libcurand-dev-13-0",
      "files./usr/local/cuda-13.0/include/curand.h",
      "files./usr/local/cuda-13.0/lib64/libcurand.so",
    ]);
    const pkg = read.props.drift.find((d) => d.field === "packages.libcurand-dev-13-0")!;
    expect(pkg).toEqual({
      field: "packages.libcurand-dev-13-0",
      expected: "10.4.0.35-1",
      found: null,
      repair: "apt-get install --reinstall libcurand-dev-13-0",
    });
    const header = read.props.drift.find((d) => d.field.endsWith("curand.h"))!;
    expect(header.found).toBeNull();
    expect(header.repair).toBe("apt-get install --reinstall libcurand-dev-13-0");

    // update (the next `pulumi up`) refuses to record a host that still does not match...
    await expect(impl.update(read.id, read.props, read.inputs)).rejects.toThrow(
      /packages\.libcurand-dev-13-0: expected 10\.4\.0\.35-1, found \(absent\)/,
    );
    // ...and once the toolkit is installed again, read is clean and update records it.
    await onHost(conn, "apt-get install -y cuda-toolkit-13-0 >/dev/null");
    const again = await impl.read(read.id, read.props);
    expect(again.props.drift).toEqual([]);
    expect((await impl.diff(read.id, again.props, again.inputs)).changes).toBe(false);
    expect((await impl.update(read.id, read.props, read.inputs)).outs.drift).toEqual([]);
  });

  it("/usr/local/cuda pointed at 12.8: only cudaLink drifts, with the update-alternatives repair", async () => {
    const { conn, read, changes } = await driftAfter(
      [
        "apt-get install -y cuda-toolkit-12-8 >/dev/null",
        "update-alternatives --install /usr/local/cuda cuda /usr/local/cuda-12.8 128 >/dev/null",
        "update-alternatives --set cuda /usr/local/cuda-12.8 >/dev/null",
      ].join("\n"),
    );
    expect(changes).toBe(true);
    expect(read.props.drift).toEqual([
      {
        field: "cudaLink",
        expected: "/usr/local/cuda-13.0",
        found: "/usr/local/cuda-12.8",
        repair: "update-alternatives --set cuda /usr/local/cuda-13.0",
      },
    ]);
    await onHost(conn, "update-alternatives --set cuda /usr/local/cuda-13.0 >/dev/null");
    expect((await impl.read(read.id, read.props)).props.drift).toEqual([]);
  });

  it("a unit file edited on the host: only its hash drifts", async () => {
    const { read, changes, created } = await driftAfter(
      `echo 'Environment=CUDA_HOME=/usr/local/cuda-12.8' >>"$GPUHOST_ROOT${UNIT_FILE}"`,
    );
    expect(changes).toBe(true);
    expect(fields(read.props)).toEqual([`units.${UNIT_FILE}.sha256`]);
    const d = read.props.drift[0];
    expect(d.expected).toBe(created.expected.units[UNIT_FILE].sha256);
    expect(d.found).toMatch(/^[0-9a-f]{64}$/);
    expect(d.found).not.toBe(d.expected);
    expect(d.repair).toContain("systemctl daemon-reload && systemctl restart sglang-test.service");
  });

  it("a unit disabled: only is-enabled drifts", async () => {
    const { read } = await driftAfter("systemctl disable sglang-test.service");
    expect(read.props.drift).toEqual([
      {
        field: `units.${UNIT_FILE}.enabled`,
        expected: "enabled",
        found: "disabled",
        repair: "systemctl enable sglang-test.service",
      },
    ]);
  });

  it("a unit that crashed where it should be stopped: drift says reset-failed (a stop leaves it failed)", async () => {
    // Started once from a copy whose process exits 1 (Restart=no: failed), then the file put back.
    const { conn, read } = await driftAfter(`
      u="$GPUHOST_ROOT${UNIT_FILE}"
      cp "$u" "$u.orig" && sed -i 's#^ExecStart=/bin/true#ExecStart=/bin/false#' "$u"
      systemctl daemon-reload && systemctl start sglang-test.service
      for i in $(seq 100); do systemctl is-failed --quiet sglang-test.service && break; sleep 0.1; done
      mv "$u.orig" "$u" && systemctl daemon-reload`);
    expect(read.props.drift).toEqual([
      {
        field: `units.${UNIT_FILE}.active`,
        expected: "inactive",
        found: "failed",
        repair:
          "journalctl -u sglang-test.service says why it failed; systemctl reset-failed sglang-test.service clears it",
      },
    ]);
    await onHost(conn, "systemctl stop sglang-test.service");
    expect((await impl.read(read.id, read.props)).props.drift).toHaveLength(1);
    await onHost(conn, "systemctl reset-failed sglang-test.service");
    expect((await impl.read(read.id, read.props)).props.drift).toEqual([]);
  });

  it("a header replaced: only that file drifts, expected is the recorded hash, repair names its package", async () => {
    const file = "/usr/local/cuda-13.0/include/cusparse.h";
    const { conn, read, created, changes } = await driftAfter(
      `rm -f "$GPUHOST_ROOT${file}"; echo '/* 12.8 header copied in */' >"$GPUHOST_ROOT${file}"`,
    );
    expect(changes).toBe(true);
    expect(fields(read.props)).toEqual([`files.${file}`]);
    const d = read.props.drift[0];
    expect(d.expected).toBe(created.baseline.files[file]);
    expect(d.found).toBe(read.props.observed.files[file]);
    expect(d.found).not.toBe(d.expected);
    expect(d.repair).toBe("apt-get install --reinstall libcusparse-dev-13-0 (the file's content changed)");
    // update keeps the recorded hash (the expectation did not change): the replaced header stays drift.
    await expect(impl.update(read.id, read.props, read.inputs)).rejects.toThrow(/include\/cusparse\.h/);
    // Reinstalling the package restores it (the simulated apt-get has no --reinstall: remove + install).
    await onHost(
      conn,
      "apt-get remove -y libcusparse-dev-13-0 >/dev/null\napt-get install -y cuda-toolkit-13-0 >/dev/null",
    );
    expect((await impl.read(read.id, read.props)).props.drift).toEqual([]);
  });

  it("the JIT cache key changed: jit.key drifts, naming the stale cache to remove", async () => {
    const { read, changes } = await driftAfter(
      `mv "$GPUHOST_ROOT${JIT_BASE}/${JIT_KEY}" "$GPUHOST_ROOT${JIT_BASE}/cuda12.8-torch2.9-sm120"`,
    );
    expect(changes).toBe(true);
    expect(read.props.drift).toEqual([
      {
        field: "jit.key",
        expected: JIT_KEY,
        found: "cuda12.8-torch2.9-sm120",
        repair: `remove stale JIT caches: rm -rf ${JIT_BASE}/cuda12.8-torch2.9-sm120; re-create ${JIT_BASE}/${JIT_KEY} (pulumi up)`,
      },
    ]);
  });

  it("nvcc through PATH from another toolkit: nvcc.path.version drifts", async () => {
    const conn = host();
    await onHost(conn, "apt-get install -y cuda-toolkit-12-8 >/dev/null");
    const expected = { ...expectedForSim(), unitPath: "/usr/local/cuda-12.8/bin:/usr/bin" };
    const { outs } = await impl.create(inputs(conn, { expected, onDrift: "record" }));
    expect(outs.drift).toEqual([
      {
        field: "nvcc.path.version",
        expected: "13.0",
        found: "12.8",
        repair: "/usr/local/cuda-12.8/bin/nvcc comes first on the units' PATH: put /usr/local/cuda-13.0/bin before it",
      },
    ]);
  });

  it("create on a host that already differs fails with onDrift=fail and records with onDrift=record", async () => {
    const conn = host();
    await onHost(conn, "apt-get remove -y libcusparse-dev-13-0 >/dev/null");
    await expect(impl.create(inputs(conn))).rejects.toThrow(
      /does not match what was provisioned[\s\S]*packages\.libcusparse-dev-13-0/,
    );
    const { outs } = await impl.create(inputs(conn, { onDrift: "record" }));
    expect(fields(outs)).toContain("packages.libcusparse-dev-13-0");
  });

  it("diff reports a change when the provider version or the expectation changes, or inputs are unknown", async () => {
    const conn = host();
    const { id, outs } = await impl.create(inputs(conn));
    expect((await impl.diff(id, outs, inputs(conn))).changes).toBe(false);
    expect((await impl.diff(id, outs, inputs(conn, { providerVersion: "0" }))).changes).toBe(true);
    expect(
      (await impl.diff(id, outs, inputs(conn, { expected: { ...expectedForSim(), jitKey: "other" } }))).changes,
    ).toBe(true);
    const unknown = {
      ...inputs(conn),
      expected: PULUMI_UNKNOWN,
    } as unknown as ToolkitStateInputs;
    expect((await impl.diff(id, outs, unknown)).changes).toBe(true);
  });

  it("update after a changed expectation re-records the baseline", async () => {
    const conn = host();
    const { id, outs } = await impl.create(inputs(conn));
    const file = "/usr/local/cuda-13.0/include/curand.h";
    fs.writeFileSync(path.join(conn.root, file), "/* upgraded */\n");
    const news = inputs(conn, {
      expected: { ...expectedForSim(), packages: { ...expectedForSim().packages, "libcurand-dev-13-0": "" } },
    });
    const { outs: updated } = await impl.update(id, outs, news);
    expect(updated.drift).toEqual([]);
    expect(updated.baseline.files[file]).not.toBe(outs.baseline.files[file]);
  });

  it("check names invalid inputs by property, the path inside it in the reason; a repair script that is not there is named", async () => {
    const conn = host();
    const bad = inputs(conn, {
      expected: { ...expectedForSim(), toolkitVersion: "thirteen" },
    });
    const { failures } = await impl.check({}, bad);
    expect(failures.map((f) => f.property)).toEqual(["expected"]);
    expect(failures[0].reason).toMatch(/^expected\.toolkitVersion: /);
    expect((await impl.check({}, inputs(conn))).failures).toEqual([]);
    const missing = await impl.check({}, inputs(conn, { repairs: [{ fields: ["x"], script: "components/nope.sh" }] }));
    expect(missing.failures.map((f) => f.property)).toEqual(["repairs"]);
    expect(missing.failures[0].reason).toMatch(/^repairs\.0\.script: .*components\/nope\.sh does not exist$/);
  });

  it("an unreachable host makes read fail (a refresh error, not a clean result)", async () => {
    const conn = host();
    const { id, outs } = await impl.create(inputs(conn));
    const unreachable = {
      ...outs,
      connection: {
        kind: "ssh" as const,
        host: "127.0.0.1",
        port: 1,
        user: "root",
        privateKey: "-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-key\n-----END OPENSSH PRIVATE KEY-----\n",
      },
    };
    await expect(impl.read(id, unreachable)).rejects.toThrow(/toolkit probe exited 255/);
  });
});
