// Measures how long one toolkit probe takes (the cost `pulumi refresh` pays per host): on a
// simulated host provisioned through the host layer's shims, and over SSH when
// GPUHOST_TESTHOST_SSH names a reachable host ("user@host:port", key in GPUHOST_TESTHOST_KEY).
// With --testhost it boots the test suite's real Debian host (systemd-nspawn, needs root) and
// probes it over SSH; that host has no toolkit installed, so the probe finds every file missing
// but runs every command it runs on a provisioned host, in one SSH round trip.
// Usage: npx tsx bench/drift-probe.ts [runs=20] [--testhost]
import * as fs from "node:fs";
import type { HostConnection } from "../components/host/connection";
import { probeHost } from "../components/drift/probe";
import { expectedForSim, provisionGoldenHost, removeHost } from "../test/drift/sim-host";
import { simulatedConnection } from "../sim-host/platform";

async function time(conn: HostConnection, runs: number): Promise<number[]> {
  const expected = expectedForSim();
  const ms: number[] = [];
  await probeHost(conn, expected); // warm the page cache and node's module cache for the shims
  for (let i = 0; i < runs; i++) {
    const t = process.hrtime.bigint();
    await probeHost(conn, expected);
    ms.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return ms.sort((a, b) => a - b);
}

const summary = (label: string, ms: number[]): string => {
  const q = (p: number) => ms[Math.min(ms.length - 1, Math.floor(p * ms.length))].toFixed(0);
  return `${label}: ${ms.length} probes, median ${q(0.5)} ms, p90 ${q(0.9)} ms, max ${ms[ms.length - 1].toFixed(0)} ms`;
};

(async () => {
  const runs = Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 20);
  const root = await provisionGoldenHost();
  try {
    console.log(summary("simulated host", await time(simulatedConnection(root), runs)));
    const parallel = 4;
    const t = process.hrtime.bigint();
    await Promise.all(Array.from({ length: parallel }, () => probeHost(simulatedConnection(root), expectedForSim())));
    console.log(
      `simulated host: ${parallel} probes in parallel took ${(Number(process.hrtime.bigint() - t) / 1e6).toFixed(0)} ms`,
    );
  } finally {
    removeHost(root);
  }
  if (process.argv.includes("--testhost")) {
    const { bootTestHost } = await import("../test/testhost/harness");
    const host = await bootTestHost({ name: "probe" });
    try {
      const conn: HostConnection = {
        kind: "ssh",
        user: host.user,
        host: host.host,
        port: host.port,
        privateKey: host.privateKey,
      };
      console.log(summary(`ssh test host ${host.host}:${host.port}`, await time(conn, runs)));
      const parallel = 4;
      const t = process.hrtime.bigint();
      await Promise.all(Array.from({ length: parallel }, () => probeHost(conn, expectedForSim())));
      console.log(
        `ssh test host: ${parallel} probes in parallel took ${(Number(process.hrtime.bigint() - t) / 1e6).toFixed(0)} ms`,
      );
    } finally {
      await host.stop();
    }
    return;
  }
  const ssh = process.env.GPUHOST_TESTHOST_SSH;
  const key = process.env.GPUHOST_TESTHOST_KEY;
  if (ssh && key) {
    const m = /^([^@]+)@([^:]+):(\d+)$/.exec(ssh);
    if (!m) throw new Error("GPUHOST_TESTHOST_SSH must be user@host:port");
    const conn: HostConnection = {
      kind: "ssh",
      user: m[1],
      host: m[2],
      port: Number(m[3]),
      privateKey: fs.readFileSync(key, "utf8"),
    };
    console.log(summary(`ssh ${ssh}`, await time(conn, runs)));
  } else {
    console.log(
      "ssh: skipped (set GPUHOST_TESTHOST_SSH=user@host:port and GPUHOST_TESTHOST_KEY=<key file> to measure a real host)",
    );
  }
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
