/**
 * End to end on a real Debian host: the real gpuhost program under the real Pulumi engine, over SSH,
 * on a `testhost` stack (NVIDIA's CUDA 13.0 files in the test host's packages, stand-in Python stack,
 * see README.md). One host, in order:
 * fresh up, no-op up, drift seen by refresh and repaired by up, service switch, a crash on first
 * generation failing up, destroy. Each step relies on the ones before it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { promises as fs } from "node:fs";
import * as path from "node:path";
import { requireTestHost } from "./harness";
import { writeStandinSglangConfig } from "./simulator-install";
import { startTestHostFixture, TestHostFixture } from "./testhost-stack";

const enabled = requireTestHost();
const STEP = 10 * 60_000;
const UNIT_DIR = "/etc/systemd/system";

describe.runIf(enabled)("testhost stack: pulumi up/refresh/destroy over SSH on a real Debian host", () => {
  let f: TestHostFixture;
  const sh = (cmd: string) => f.host.execOk(cmd).then((r) => r.stdout.trim());
  const activeSglangUnits = async () =>
    (await f.host.exec("systemctl list-units 'sglang-*.service' --state=active --plain --no-legend")).stdout
      .split("\n")
      .map((l) => l.split(/\s+/)[0])
      .filter(Boolean);
  const gpuHost = async () => ((await f.stack.outputs()).gpuHosts as Record<string, Record<string, unknown>>).testhost;

  // Where SGLang would have downloaded the served model (a repository id) for the service user: the
  // stack reads its config.json there over SSH for the roofline (issue 28).
  const MODEL_CONFIG = "/var/lib/sglang/.cache/huggingface/hub/models--sim--tiny-reasoner/snapshots/e2e/config.json";

  beforeAll(async () => {
    // RestartSec=2, not 15: through its SSH tunnel the gate tells the crash by the unit's restart
    // (a dead port behind a tunnel reads as a reset, not a refusal), so the crash case waited 15 s
    f = await startTestHostFixture("e2e", {
      toolkit: { removeOnDestroy: true },
      services: { restart: { restartSec: 2 } },
    });
    const config = await fs.readFile(path.join(__dirname, "..", "physics", "fixtures", "llama-3.1-8b.config.json"));
    await f.host.execOk(`mkdir -p ${path.dirname(MODEL_CONFIG)} && cat > ${MODEL_CONFIG}`, {
      input: config.toString("utf8"),
    });
  }, 30 * 60_000);

  afterAll(async () => {
    await f?.stop();
  }, 120_000);

  it(
    "a fresh pulumi up provisions the host over SSH and the gate passes, leaving throughput outputs",
    async () => {
      const up = await f.stack.pulumiOk("up", "--yes", "--skip-preview");
      expect(up.stdout).toMatch(/\d+ created/);
      const out = await gpuHost();
      expect(out.generating).toBe(true);
      expect(out.benchComplete).toBe(true);
      expect(out.sustainedOutputTokensPerSecond).toBeGreaterThan(0);
      expect(out.nvccVersion).toBe("V13.0.88");
      // NVIDIA's nvcc built the proof program; no GPU here, so it says it did not run it
      expect(out.toolkitProof).toBe("compiled and linked with nvcc 13.0.88; not run: no GPU");
      expect(out.activeUnit).toBe("sglang-autoregressive.service");
      // The model's config.json was read on the host; a host without GPUs has no roofline to give.
      expect(out.roofline).toEqual({
        known: false,
        reason: `not known: the host has no GPUs (gpus.count 0) (the model's config.json was read: ${MODEL_CONFIG})`,
      });
      // verify.sh reports the links where GPUs exist; here it says there are none.
      expect(out.topology).toEqual({
        links: [],
        pairs: [],
        p2p: { status: "not run", detail: "not run: no GPU", pairs: [] },
        notes: [],
        problems: [],
      });
      expect(await sh("dpkg-query -W -f='${Status}' cuda-toolkit-13-0")).toBe("install ok installed");
      expect(await sh("readlink -f /usr/local/cuda")).toBe("/usr/local/cuda-13.0");
      expect(await activeSglangUnits()).toEqual(["sglang-autoregressive.service"]);
      // apt really read the signed repository (file:// on the host), signature checked
      expect(await sh("ls /var/lib/apt/lists/ | grep -c '^_srv_gpuhost-apt_.*InRelease$'")).toBe("1");
      // the drift baseline holds the hash of NVIDIA's curand.h as installed, not a stand-in's
      const curand = "/usr/local/cuda-13.0/include/curand.h";
      expect(await sh(`grep -c 'gpuhost stand-in' ${curand} || true`)).toBe("0");
      const state = (await f.stack.pulumiOk("stack", "export")).stdout;
      expect(state).toContain(await sh(`sha256sum ${curand} | cut -d' ' -f1`));
    },
    STEP,
  );

  it(
    "a second pulumi up changes nothing and does not restart the service",
    async () => {
      const pidBefore = await sh("systemctl show -p MainPID --value sglang-autoregressive.service");
      // One engine command, not a preview and then an up: --expect-no-changes makes the up itself
      // fail if its plan (after the refresh, as the preview's) holds any change.
      const up = await f.stack.pulumi("up", "--yes", "--skip-preview", "--expect-no-changes");
      expect(up.code, up.stdout + up.stderr).toBe(0);
      expect(up.stdout).not.toMatch(/\d+ (created|updated|replaced|deleted)/);
      expect(up.stdout).toMatch(/\d+ unchanged/);
      expect(await sh("systemctl show -p MainPID --value sglang-autoregressive.service")).toBe(pidBefore);
    },
    STEP,
  );

  it(
    "the SSH private key is in neither state nor outputs in plaintext",
    async () => {
      // Any line of the key's body would give it away; the key is only stored encrypted.
      const body = f.host.privateKey.split("\n").filter((l) => l && !l.startsWith("-----"));
      expect(body.length).toBeGreaterThan(0);
      const state = (await f.stack.pulumiOk("stack", "export")).stdout;
      const outputs = JSON.stringify(await f.stack.outputs());
      for (const line of body) {
        expect(state).not.toContain(line);
        expect(outputs).not.toContain(line);
      }
      // The check can fail: with --show-secrets the key is there.
      const shown = (await f.stack.pulumiOk("stack", "export", "--show-secrets")).stdout;
      expect(shown).toContain(body[1]);
    },
    STEP,
  );

  it(
    "drift made on the host is reported by refresh --preview-only --expect-no-changes, naming what drifted",
    async () => {
      const unit = `${UNIT_DIR}/sglang-autoregressive.service`;
      await sh("DEBIAN_FRONTEND=noninteractive apt-get -y -q remove libcurand-dev-13-0");
      await sh(
        "DEBIAN_FRONTEND=noninteractive apt-get -y -q install cuda-toolkit-12-8 && update-alternatives --set cuda /usr/local/cuda-12.8",
      );
      await sh(`sed -i 's/^RestartSec=.*/RestartSec=1/' ${unit} && systemctl daemon-reload`);
      const r = await f.stack.refreshPreview();
      const text = r.stdout + r.stderr;
      expect(r.code, text).not.toBe(0);
      // ToolkitState's drift entries: the field that drifted and the repair for it
      expect(text).toContain("packages.libcurand-dev-13-0");
      expect(text).toMatch(/\/usr\/local\/cuda-12\.8/);
      expect(text).toContain("update-alternatives --set cuda /usr/local/cuda-13.0");
      expect(text).toMatch(/units\.[^\s"']*sglang-autoregressive\.service\.sha256/);
      expect(text).toContain("the unit file was edited on the host");
    },
    STEP,
  );

  it(
    "the next pulumi up repairs the drift, and refresh then expects no changes",
    async () => {
      await f.stack.pulumiOk("up", "--yes", "--skip-preview");
      expect(await sh("dpkg-query -W -f='${Status}' libcurand-dev-13-0")).toBe("install ok installed");
      expect(await sh("readlink -f /usr/local/cuda")).toBe("/usr/local/cuda-13.0");
      expect(await sh(`grep '^RestartSec=' ${UNIT_DIR}/sglang-autoregressive.service`)).not.toBe("RestartSec=1");
      const again = await f.stack.refreshPreview();
      expect(again.code, again.stdout + again.stderr).toBe(0);
      // 12.8 was the test's own drift, not something the stack installed: take it away again
      await sh(
        "DEBIAN_FRONTEND=noninteractive apt-get -y -q purge cuda-toolkit-12-8 'cuda-*-12-8' 'libcu*-12-8' cuda-toolkit-12-8-config-common",
      );
      expect(await sh("readlink -f /usr/local/cuda")).toBe("/usr/local/cuda-13.0");
    },
    STEP,
  );

  it(
    "switching the active service from autoregressive to eagle3 leaves exactly one active",
    async () => {
      await f.stack.setConfig({ services: { active: "eagle3" } });
      await f.stack.pulumiOk("up", "--yes", "--skip-preview");
      expect(await activeSglangUnits()).toEqual(["sglang-eagle3.service"]);
      const out = await gpuHost();
      expect(out.activeService).toBe("eagle3");
      expect(out.generating).toBe(true);
    },
    STEP,
  );

  it(
    "a service that crashes on its first generation makes pulumi up fail with the curand.h line",
    async () => {
      // the stand-in sglang starts the simulator with the jit-crash fault: the first generation prints
      // FlashInfer's failed compile and the process exits, as the story's server did
      await writeStandinSglangConfig(f.host.rootDir, {
        profiles: { default: "tiny" },
        timeScale: 1,
        faults: ["jit-crash"],
      });
      await f.stack.setConfig({ services: { active: "autoregressive" } });
      const up = await f.stack.pulumi("up", "--yes", "--skip-preview");
      expect(up.code).not.toBe(0);
      // the host side first: the unit's journal holds the line, so a failure below is the gate's report
      const journal = await sh("journalctl -u sglang-autoregressive.service --no-pager -o cat");
      expect(journal).toContain("fatal error: curand.h: No such file or directory");
      expect(up.stdout + up.stderr).toContain("fatal error: curand.h: No such file or directory");
    },
    STEP,
  );

  it(
    "with the cause gone, the next pulumi up converges",
    async () => {
      await writeStandinSglangConfig(f.host.rootDir, { profiles: { default: "tiny" }, timeScale: 1, faults: [] });
      // The stand-in reads its fault at launch, so the process systemd's Restart=on-failure started
      // after the crash still carries it: removing the cause means a new process, as a toolkit repair
      // (which restarts the active unit) would give. Nothing in the stack changed: the retry below is
      // the failed VerifiedGeneration create being run again by the next up.
      await sh("systemctl restart sglang-autoregressive.service");
      await f.stack.pulumiOk("up", "--yes", "--skip-preview");
      const out = await gpuHost();
      expect(out.generating).toBe(true);
      expect(await activeSglangUnits()).toEqual(["sglang-autoregressive.service"]);
    },
    STEP,
  );

  it(
    "pulumi destroy removes the units and leaves the host clean",
    async () => {
      await f.stack.pulumiOk("destroy", "--yes", "--skip-preview");
      expect(await activeSglangUnits()).toEqual([]);
      expect(await sh(`ls ${UNIT_DIR} | grep -c '^sglang-' || true`)).toBe("0");
      expect(await sh("pgrep -f '^/usr/bin/node /opt/gpuhost-sim/' || true")).toBe("");
      expect(
        await sh(
          "dpkg-query -W -f='${Package} ${Status}\\n' 'cuda-*-13-0' 'libcu*-13-0' 2>/dev/null | grep -c 'install ok installed' || true",
        ),
      ).toBe("0");
      expect((await f.host.exec("test -e /usr/local/cuda")).code).not.toBe(0);
      const leftover = await fs.readdir(path.join(f.host.rootDir, "etc/systemd/system/multi-user.target.wants"));
      expect(leftover.filter((u) => u.startsWith("sglang-"))).toEqual([]);
    },
    STEP,
  );
});
