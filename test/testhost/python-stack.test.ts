/**
 * The stand-in Python serving stack on a real Debian host: pip installs the pinned stand-in wheels
 * from the loopback index into a venv, and `python -m sglang.launch_server` under systemd really
 * starts a server (the project's simulator on the host's Node.js). With libcurand-dev removed,
 * FlashInfer's JIT compile fails on the host's own nvcc and the first generation kills the service.
 */
import * as os from "node:os";
import * as path from "node:path";
import { promises as fs } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AptRepo, serveAptRepo } from "./apt-repo";
import { freeLocalPort } from "../../ports";
import { bootTestHost, requireTestHost, TestHost } from "./harness";
import { PythonIndex, servePythonIndex } from "./python-index";
import { buildSimulatorBundle, installSimulator, writeStandinSglangConfig } from "./simulator-install";

const enabled = requireTestHost();
const APT = "DEBIAN_FRONTEND=noninteractive apt-get -y -q";
const VENV = "/opt/gpuhost/venv";

/** A unit like ServingService renders: CUDA_HOME and PATH set, because systemd's PATH lacks CUDA. */
function unit(port: number, cudaHome: string): string {
  return [
    "[Unit]",
    "Description=stand-in sglang (test)",
    "[Service]",
    `Environment=CUDA_HOME=${cudaHome}`,
    `Environment=PATH=${VENV}/bin:${cudaHome}/bin:/usr/sbin:/usr/bin:/sbin:/bin`,
    "Environment=FLASHINFER_WORKSPACE_BASE=/var/cache/gpuhost/flashinfer/test",
    `ExecStart=${VENV}/bin/python3 -m sglang.launch_server --model-path sim/tiny-reasoner --served-model-name tiny --host 127.0.0.1 --port ${port} --tp 1`,
    "Restart=no",
    "",
  ].join("\n");
}

async function chat(port: number): Promise<Response> {
  return fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "tiny", messages: [{ role: "user", content: "Say just 'OK'" }], max_tokens: 16 }),
    signal: AbortSignal.timeout(60_000),
  });
}

async function waitForModels(port: number, host: TestHost, boundMs = 60_000): Promise<void> {
  const deadline = Date.now() + boundMs;
  while (Date.now() < deadline) {
    const ok = await fetch(`http://127.0.0.1:${port}/v1/models`, { signal: AbortSignal.timeout(2000) }).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  const journal = await host.exec("journalctl -u gpuhost-standin.service --no-pager -o cat | tail -40");
  throw new Error(`stand-in server never answered /v1/models on ${port}\n${journal.stdout}`);
}

describe.runIf(enabled)("stand-in Python serving stack on a real Debian host", () => {
  let repo: AptRepo;
  let index: PythonIndex;
  let host: TestHost;
  let bundleDir: string;

  beforeAll(async () => {
    repo = await serveAptRepo();
    index = await servePythonIndex();
    bundleDir = await fs.mkdtemp(path.join(os.tmpdir(), "gpuhost-simbundle-"));
    await buildSimulatorBundle(bundleDir);
    host = await bootTestHost({ name: "pystack" });
    await installSimulator(bundleDir, host.rootDir);
    await writeStandinSglangConfig(host.rootDir, { profiles: { default: "tiny" }, timeScale: 1, faults: [] });
    await host.execOk(
      `curl -fsSLo /tmp/k.deb ${repo.keyringDebUrl} && dpkg -i /tmp/k.deb && ${APT} update && ${APT} install cuda-toolkit-13-0`,
    );
  }, 30 * 60_000);

  afterAll(async () => {
    await host?.stop();
    await repo?.close();
    await index?.close();
    if (bundleDir) await fs.rm(bundleDir, { recursive: true, force: true });
  }, 60_000);

  it("pip installs the pinned stand-ins from the loopback index; torch reports CUDA 13.0", async () => {
    await host.execOk(
      `python3 -m venv ${VENV} && ${VENV}/bin/python3 -m pip install -q --disable-pip-version-check --no-input --index-url ${index.indexUrl} ${index.requirements.join(" ")}`,
      { timeoutMs: 300_000 },
    );
    expect(index.requests).toContain("/simple/torch/");
    const torch = await host.execOk(
      `${VENV}/bin/python3 -c 'import torch; print(torch.__version__, torch.version.cuda)'`,
    );
    expect(torch.stdout.trim()).toBe(`${index.versions.torch} 13.0`);
    const cfg = await host.execOk(`CUDA_HOME=/usr/local/cuda-13.0 ${VENV}/bin/flashinfer show-config`);
    expect(cfg.stdout).toContain("nvcc release: 13.0");
    expect((await host.execOk(`${VENV}/bin/ninja --version`)).stdout.trim()).toBe(index.versions.ninja);
  }, 300_000);

  it("refuses a pin the index does not hold (pip fails, nothing is faked)", async () => {
    const r = await host.exec(
      `${VENV}/bin/python3 -m pip install -q --no-input --index-url ${index.indexUrl} 'torch==0.0.1+cu130'`,
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/No matching distribution found for torch==0.0.1\+cu130/);
  });

  it("the host's Node.js runs the compiled simulator", async () => {
    const r = await host.execOk("node --version && node /opt/gpuhost-sim/dist/cli/sim-server.js --list");
    expect(r.stdout).toMatch(/^v18\./);
    expect(r.stdout).toContain("tiny");
  });

  it("a systemd unit running `python -m sglang.launch_server` serves a real completion", async () => {
    const port = await freeLocalPort();
    await fs.writeFile(
      path.join(host.rootDir, "etc/systemd/system/gpuhost-standin.service"),
      unit(port, "/usr/local/cuda-13.0"),
    );
    await host.execOk("systemctl daemon-reload && systemctl start gpuhost-standin.service");
    await waitForModels(port, host);
    const res = await chat(port);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { usage: { completion_tokens: number } };
    expect(body.usage.completion_tokens).toBeGreaterThan(0);
    expect((await host.exec("systemctl is-active gpuhost-standin.service")).stdout.trim()).toBe("active");
    const journal = await host.execOk("journalctl -u gpuhost-standin.service --no-pager -o cat");
    expect(journal.stdout).toContain("exec /usr/bin/node /opt/gpuhost-sim/dist/simulator/sglang.js --model-path");
    expect(journal.stdout).toContain("(profile tiny, faults none)");
    expect(journal.stdout).not.toContain("jit-crash");
    await host.execOk("systemctl stop gpuhost-standin.service");
  }, 180_000);

  it("without libcurand-dev-13-0 the first generation dies with the curand.h line in the journal", async () => {
    await host.execOk(`${APT} remove libcurand-dev-13-0 && rm -rf /var/cache/gpuhost/flashinfer/test`);
    const port = await freeLocalPort();
    await fs.writeFile(
      path.join(host.rootDir, "etc/systemd/system/gpuhost-standin.service"),
      unit(port, "/usr/local/cuda-13.0"),
    );
    await host.execOk(
      "systemctl daemon-reload && systemctl reset-failed gpuhost-standin.service; systemctl start gpuhost-standin.service",
    );
    await waitForModels(port, host); // /v1/models answers: it proves nothing about generation
    const res = await chat(port).catch((e: Error) => e);
    expect(res instanceof Error || res.status >= 500).toBe(true);
    let state = "";
    for (let i = 0; i < 100 && state !== "failed"; i++) {
      state = (await host.exec("systemctl is-active gpuhost-standin.service")).stdout.trim();
      if (state !== "failed") await new Promise((r) => setTimeout(r, 200));
    }
    expect(state).toBe("failed");
    const journal = await host.execOk("journalctl -u gpuhost-standin.service --no-pager -o cat");
    expect(journal.stdout).toContain("fatal error: curand.h: No such file or directory");
  }, 180_000);
});
