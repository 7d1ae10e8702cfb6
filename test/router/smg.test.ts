// The real SMG (PyPI smg, hash-locked, .ci/smg.sh) in front of two simulators, started by our
// launcher: the key comes from a credential file and is in no argv, no environment, no log.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningSimulator } from "../../simulator/index";
import {
  type RunningRouter,
  startRouter,
  startSimulatorsBehindRouter,
  stopSimulatorsBehindRouter,
} from "../support/smg";

const KEY = "fleet-test-key-0123456789abcdef";
let venv = "";
const sims: RunningSimulator[] = [];
let router: RunningRouter;
const auth = { Authorization: `Bearer ${KEY}` };

beforeAll(async () => {
  const tiny = { profile: "tiny", port: 0, timeScale: 20, apiKey: KEY, log: () => undefined };
  ({ venv, router } = await startSimulatorsBehindRouter(sims, tiny, { apiKey: KEY }));
}, 600_000);

afterAll(() => stopSimulatorsBehindRouter(router, sims));

describe("smg 1.13.0 behind our launcher, in front of two simulators", () => {
  it("is the pinned release", () => {
    const out = execFileSync(`${venv}/bin/smg`, ["--version"], { encoding: "utf8" });
    expect(out).toContain("1.13.0");
  });

  it("is ready with both workers healthy, and lists them with the key only", async () => {
    const ready = await fetch(`${router.url}/readiness`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ healthy_workers: 2, total_workers: 2 });
    expect((await fetch(`${router.url}/workers`)).status).toBe(401);
    const workers = (await (await fetch(`${router.url}/workers`, { headers: auth })).json()) as {
      workers: Array<{ url: string; is_healthy: boolean }>;
    };
    expect(workers.workers.map((w) => w.url).sort()).toEqual(sims.map((s) => s.url).sort());
    expect(workers.workers.every((w) => w.is_healthy)).toBe(true);
  });

  it("generates through the router with the key (the workers get it from the router), refuses without", async () => {
    const body = JSON.stringify({ model: "tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 8 });
    const headers = { "content-type": "application/json" };
    const ok = await fetch(`${router.url}/v1/chat/completions`, {
      method: "POST",
      headers: { ...headers, ...auth },
      body,
    });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(8);
    const refused = await fetch(`${router.url}/v1/chat/completions`, { method: "POST", headers, body });
    expect(refused.status).toBe(401);
  });

  it("counts requests per worker on its Prometheus port (smg_worker_requests_total)", async () => {
    const text = await (await fetch(router.metricsUrl)).text();
    expect(text).toMatch(/^smg_worker_requests_total\{[^}]*worker="http:\/\/127\.0\.0\.1:\d+"/m);
  });

  it("has the key in no argv (ps), no environment and no log line", () => {
    const pid = router.proc.pid!;
    const ps = execFileSync("ps", ["-eo", "pid,args", "ww"], { encoding: "utf8" });
    expect(ps).not.toContain(KEY);
    expect(ps).toMatch(new RegExp(`^\\s*${pid}\\s`, "m"));
    expect(fs.readFileSync(`/proc/${pid}/cmdline`, "utf8")).not.toContain(KEY);
    expect(fs.readFileSync(`/proc/${pid}/environ`, "utf8")).not.toContain(KEY);
    expect(router.log()).not.toContain(KEY);
  });

  it("refuses a key in its config file: the key comes from the credential only", async () => {
    const r = await startRouter({ venv, workerUrls: [sims[0].url], extraConfig: { "api-key": KEY } }).then(
      () => "started",
      (e: Error) => e.message,
    );
    expect(r).toContain("api-key must come from the credential");
    expect(r).not.toContain(KEY);
  });
});
