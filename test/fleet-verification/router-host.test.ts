// The router's machine as FleetVerification probes and repairs it (router-host.ts): the Router's own
// scripts (install, configure, probe) on a simulated host, running the real SMG from the hash-locked
// venv (.ci/smg.sh) in front of a simulator. A unit edited on the host, the router stopped, its config
// rewritten: each is named by the probe, and the repair (the Router's steps again) puts it back.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  parseRouterProbe,
  probeRouterHost,
  repairRouterHost,
  routerHostDrift,
  type RouterHostCheck,
} from "../../components/fleet-verification/router-host";
import { execOnHost } from "../../components/host/exec";
import { requirementsText, SMG_VERSION } from "../../components/router/render";
import { configureStep, hostCheck, installStep } from "../../components/router/steps";
import { RouterSchema } from "../../components/router/schema";
import { prepareSimulatedHost, simulatedConnection } from "../../sim-host/platform";
import { startSimulator, type RunningSimulator } from "../../simulator/index";
import { runOk } from "../support/run";
import { freePort, smgVenv } from "../support/smg";

const clean = { unit: "a".repeat(64), config: "b".repeat(64), active: "active", smg: `smg ${SMG_VERSION}` };
const expected = { venvPath: "/opt/r/venv", unitSha256: "a".repeat(64), configSha256: "b".repeat(64) };

describe("routerHostDrift (pure)", () => {
  it("parses probe-router.sh's lines and finds nothing on a machine that matches", () => {
    const seen = parseRouterProbe(
      `unit=${"a".repeat(64)}\nconfig=${"b".repeat(64)}\nactive=active\nsmg=smg ${SMG_VERSION}\n`,
    );
    expect(seen).toEqual(clean);
    expect(routerHostDrift(expected, seen)).toEqual([]);
  });

  it("names an edited or missing unit, a rewritten config, a stopped router and another smg, each a Drift entry", () => {
    const drift = routerHostDrift(expected, {
      unit: "c".repeat(64),
      config: "missing",
      active: "failed",
      smg: "smg 1.12.0",
    });
    expect(drift.map((d) => [d.field, d.found])).toEqual([
      ["router.unit", "/etc/systemd/system/gpuhost-router.service differs (sha256 cccccccccccc): edited on the host"],
      ["router.config", "/etc/gpuhost-router/router.json is missing"],
      ["router.active", "failed"],
      ["router.venv", "smg 1.12.0"],
    ]);
    expect(drift[0].expected).toBe(
      "/etc/systemd/system/gpuhost-router.service as gpuhost rendered it (sha256 aaaaaaaaaaaa)",
    );
    expect(drift[3].expected).toBe(`smg ${SMG_VERSION} in /opt/r/venv`);
    for (const d of drift)
      expect(d.repair).toMatch(/^pulumi up: FleetVerification runs the Router's (configure|install) step again/);
    expect(
      routerHostDrift(expected, { ...clean, unit: "missing", active: "", smg: "missing" }).map((d) => [
        d.field,
        d.found,
      ]),
    ).toEqual([
      ["router.unit", "/etc/systemd/system/gpuhost-router.service is missing"],
      ["router.active", "unknown"],
      ["router.venv", "smg is missing"],
    ]);
  });
});

describe("the router's machine, probed and repaired with the Router's own scripts (simulated host, real SMG)", () => {
  let root: string;
  let sim: RunningSimulator;
  let check: RouterHostCheck;
  let routerUrl: string;
  const sh = async (script: string) => {
    const r = await execOnHost(simulatedConnection(root), `set -euo pipefail\n${script}`, [], { timeoutMs: 60_000 });
    if (r.code !== 0) throw new Error(`host script failed (${r.code}): ${r.stderr}`);
    return r.stdout;
  };
  const routerAnswers = async () => {
    for (let i = 0; i < 150; i++) {
      try {
        if ((await fetch(`${routerUrl}/liveness`, { signal: AbortSignal.timeout(1000) })).ok) return true;
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    return false;
  };

  beforeAll(async () => {
    const venv = smgVenv();
    root = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-router-host-"));
    prepareSimulatedHost(root);
    sim = await startSimulator({ profile: "tiny", port: 0, timeScale: 20, log: () => undefined });
    const router = RouterSchema.parse({
      host: "h1",
      port: await freePort(),
      prometheusPort: await freePort(),
      venvPath: "/opt/gpuhost-router/venv",
    });
    // The hash-locked venv stands where install-router.sh puts one, with the requirements it was
    // built from: the install step finds smg importable and the requirements unchanged, so no download.
    fs.mkdirSync(path.join(root, "opt/gpuhost-router"), { recursive: true });
    fs.symlinkSync(venv, path.join(root, router.venvPath));
    fs.writeFileSync(path.join(root, "opt/gpuhost-router/requirements.txt"), requirementsText());
    // The Router's own steps, as its Commands run them (components/router/steps.ts).
    const configure = configureStep(router, [sim.url], { apiKey: false, keyHash: "" });
    check = { ...hostCheck(router, configure), connection: simulatedConnection(root) };
    expect(check.installArgs).toEqual(installStep(router).args);
    expect(check.configureArgs).toEqual(configure.args);
    routerUrl = `http://127.0.0.1:${router.port}`;
    const install = await execOnHost(
      check.connection,
      fs.readFileSync(path.resolve(__dirname, "../..", installStep(router).script), "utf8"),
      check.installArgs,
      { timeoutMs: 300_000 },
    );
    expect(install.stdout).toContain(`smgVersion=smg ${SMG_VERSION}`);
    expect(install.stdout).toContain("changed=true"); // the launcher is new
    expect(await repairRouterHost(check, () => undefined)).toEqual(
      expect.arrayContaining(["repaired router.unit: /etc/systemd/system/gpuhost-router.service is missing"]),
    );
    expect(await routerAnswers()).toBe(true);
  }, 600_000);

  afterAll(async () => {
    await sh("systemctl stop gpuhost-router.service || true").catch(() => undefined);
    await sim?.close();
    if (root) fs.rmSync(root, { recursive: true, force: true });
  }, 60_000);

  it("a machine as the Router left it: no drift", async () => {
    expect(await probeRouterHost(check)).toEqual([]);
  });

  it("a unit edited on the host and the router stopped: both named; the repair restores the unit and starts it", async () => {
    await sh(
      "printf '\\n# edited by hand\\n' >>\"$GPUHOST_ROOT/etc/systemd/system/gpuhost-router.service\"; systemctl stop gpuhost-router.service",
    );
    expect((await probeRouterHost(check)).map((d) => [d.field, d.found])).toEqual([
      [
        "router.unit",
        expect.stringMatching(/^\/etc\/systemd\/system\/gpuhost-router.service differs .*edited on the host$/),
      ],
      ["router.active", "inactive"],
    ]);
    const said: string[] = [];
    const done = await repairRouterHost(check, (l) => said.push(l));
    expect(said.join("\n")).toContain("repairing the router's machine");
    expect(done).toContain("restarted=true (its unit file differed on the host)");
    expect(await probeRouterHost(check)).toEqual([]);
    expect(await routerAnswers()).toBe(true);
  }, 120_000);

  it("a config rewritten by hand: named, and the repair puts the stack's worker list back", async () => {
    await sh(`printf '{"worker-urls": []}\\n' >"$GPUHOST_ROOT/etc/gpuhost-router/router.json"`);
    expect((await probeRouterHost(check)).map((d) => d.field)).toEqual(["router.config"]);
    await repairRouterHost(check, () => undefined);
    expect(JSON.parse(await sh('cat "$GPUHOST_ROOT/etc/gpuhost-router/router.json"'))).toMatchObject({
      "worker-urls": [sim.url],
    });
    expect(await probeRouterHost(check)).toEqual([]);
  }, 120_000);

  it("smg gone from the router's venv: named; the repair reinstalls it hash-locked from router.pipIndexUrl (a file:// index on the machine) and restarts the router", async () => {
    // A PEP 503 index on the router's machine holding exactly the locked wheels (pip download checks
    // them against requirements.txt's hashes): with --index-url pip reads no other index.
    const index = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-router-index-"));
    try {
      const reqs = path.join(index, "requirements.txt");
      fs.writeFileSync(reqs, requirementsText());
      await runOk(
        path.join(smgVenv(), "bin", "pip"),
        [
          "download",
          "--quiet",
          "--disable-pip-version-check",
          "--no-deps",
          "--require-hashes",
          "-r",
          reqs,
          "-d",
          path.join(index, "files"),
        ],
        { inheritStderr: true, timeout: 600_000 },
      );
      const wheels = fs.readdirSync(path.join(index, "files")).filter((f) => f.endsWith(".whl"));
      // One per locked requirement (smg and what it needs), each under its normalized project name.
      expect(wheels).toHaveLength(requirementsText().match(/^[A-Za-z0-9][A-Za-z0-9._-]*==/gm)!.length);
      for (const w of wheels) {
        const project = w.split("-")[0].toLowerCase().replace(/[._]+/g, "-");
        fs.mkdirSync(path.join(index, "simple", project), { recursive: true });
        fs.writeFileSync(path.join(index, "simple", project, "index.html"), `<a href="../../files/${w}">${w}</a>\n`);
      }
      const fromIndex: RouterHostCheck = {
        ...check,
        installArgs: installStep({ venvPath: check.venvPath, pipIndexUrl: `file://${index}/simple/` }).args,
      };
      expect(fromIndex.installArgs.slice(3)).toEqual(["--index-url", `file://${index}/simple/`]);

      // The venv was the tests' cached one, linked in: removing the link leaves no smg there.
      fs.rmSync(path.join(root, check.venvPath));
      expect((await probeRouterHost(fromIndex)).map((d) => [d.field, d.found])).toEqual([
        ["router.venv", "smg is missing"],
      ]);
      const done = await repairRouterHost(fromIndex, () => undefined);
      expect(done).toContain("repaired router.venv: smg is missing");
      // Restarted: by the configure step (when smg's loss had stopped it) or by the restart step after it.
      expect(done.some((l) => l.startsWith("restarted=true") || l === "restarted=gpuhost-router.service")).toBe(true);
      expect(fs.lstatSync(path.join(root, check.venvPath)).isSymbolicLink()).toBe(false);
      expect(await probeRouterHost(fromIndex)).toEqual([]);
      expect(await routerAnswers()).toBe(true);
    } finally {
      fs.rmSync(index, { recursive: true, force: true });
    }
  }, 900_000);
});
