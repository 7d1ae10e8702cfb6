// The real SMG router for tests: .ci/smg.sh builds its venv once per machine (smg from PyPI,
// hash-locked) and prints it; startRouter runs our launcher (components/router/launcher.py) from it
// with the key handed over as a credential file, the way gpuhost-router.service does.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { projectRoot } from "../../project-files";
import { type RunningSimulator, type SimulatorOptions, startSimulator } from "../../simulator/index";

/** The cached venv holding smg (built on first use: about a minute, once per machine). */
export function smgVenv(): string {
  return execFileSync("bash", [path.join(projectRoot(), ".ci", "smg.sh")], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  }).trim();
}

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

export interface RunningRouter {
  url: string;
  metricsUrl: string;
  proc: ChildProcess;
  log: () => string;
  stop(): Promise<void>;
}

/** Our launcher under the cached venv, its key (if any) in a credentials folder of its own. */
export async function startRouter(opts: {
  venv: string;
  workerUrls: string[];
  apiKey?: string;
  policy?: string;
  /** Extra entries of the launcher's config file. */
  extraConfig?: Record<string, unknown>;
}): Promise<RunningRouter> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-router-"));
  const creds = path.join(dir, "credentials");
  fs.mkdirSync(creds, { mode: 0o700 });
  if (opts.apiKey) fs.writeFileSync(path.join(creds, "router-api-key"), `api-key: "${opts.apiKey}"\n`, { mode: 0o400 });
  const [port, metrics] = [await freePort(), await freePort()];
  fs.writeFileSync(
    path.join(dir, "router.json"),
    JSON.stringify({
      host: "127.0.0.1",
      port,
      "worker-urls": opts.workerUrls,
      policy: opts.policy ?? "cache_aware",
      "prometheus-host": "127.0.0.1",
      "prometheus-port": metrics,
      ...opts.extraConfig,
    }),
  );
  let log = "";
  const proc = spawn(
    path.join(opts.venv, "bin", "python"),
    [path.join(projectRoot(), "components", "router", "launcher.py"), path.join(dir, "router.json")],
    {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", CREDENTIALS_DIRECTORY: creds },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  proc.stdout.on("data", (b: Buffer) => (log += b.toString()));
  proc.stderr.on("data", (b: Buffer) => (log += b.toString()));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      const gone = new Promise((r) => proc.once("exit", r));
      proc.kill("SIGTERM");
      const t = setTimeout(() => proc.kill("SIGKILL"), 5000);
      await gone;
      clearTimeout(t);
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };
  // Bounded: the router answers /liveness within seconds or the test fails with its log.
  for (let i = 0; i < 300; i++) {
    if (proc.exitCode !== null) break;
    try {
      if ((await fetch(`${url}/liveness`, { signal: AbortSignal.timeout(1000) })).ok)
        return { url, metricsUrl: `http://127.0.0.1:${metrics}/metrics`, proc, log: () => log, stop };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  await stop();
  throw new Error(`the router did not come up:\n${log.slice(-3000)}`);
}

/**
 * SMG checks new workers every 30 s by default, and a stopped host must show unhealthy within seconds:
 * the router settings of tests and benches that start and stop workers.
 */
export const QUICK_ROUTER = {
  "worker-startup-check-interval": 1,
  "health-check-interval-secs": 1,
  "health-check-timeout-secs": 1,
  "health-failure-threshold": 2,
  "health-success-threshold": 1,
};

/** Waits (bounded) until the router's /readiness counts `n` healthy workers; returns its last answer. */
export async function waitForHealthyWorkers(url: string, n: number, timeoutMs = 120_000): Promise<unknown> {
  const until = Date.now() + timeoutMs;
  let last: unknown = undefined;
  while (Date.now() < until) {
    try {
      const r = await fetch(`${url}/readiness`, { signal: AbortSignal.timeout(2000) });
      last = await r.json();
      if ((last as { healthy_workers?: number }).healthy_workers === n) return last;
    } catch (e) {
      last = String(e);
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`the router did not count ${n} healthy workers within ${timeoutMs} ms: ${JSON.stringify(last)}`);
}

/**
 * COUNT simulators started with SIM, pushed into SIMS as they come up (so an afterAll can close the
 * ones a failed start left), behind the real SMG started by our launcher with ROUTER's key and policy;
 * resolves once SMG holds every one of them healthy (it registers its startup workers in the
 * background once they answer, and the simulators load first).
 */
export async function startSimulatorsBehindRouter(
  sims: RunningSimulator[],
  sim: SimulatorOptions,
  router: { apiKey: string; policy?: string },
  count = 2,
): Promise<{ venv: string; router: RunningRouter }> {
  const venv = smgVenv();
  for (let i = 0; i < count; i++) sims.push(await startSimulator(sim));
  const r = await startRouter({ venv, workerUrls: sims.map((s) => s.url), ...router });
  await waitForHealthyWorkers(r.url, count);
  return { venv, router: r };
}

/** Stops ROUTER (where it was started), then SIMS. */
export async function stopSimulatorsBehindRouter(router: RunningRouter | undefined, sims: RunningSimulator[]) {
  await router?.stop();
  await Promise.all(sims.map((s) => s.close()));
}
