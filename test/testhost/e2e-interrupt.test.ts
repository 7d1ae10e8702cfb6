/**
 * An installation interrupted midway converges on the next `pulumi up`: on a fresh test host, dpkg
 * is killed (SIGKILL) in the middle of unpacking the toolkit, as a dropped session or a reboot would
 * leave it; the first up fails and leaves dpkg half-done, the next up repairs it and the gate passes.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requireTestHost } from "./harness";
import { startTestHostFixture, TestHostFixture } from "./testhost-stack";

const enabled = requireTestHost();
const STEP = 10 * 60_000;

// Runs on the host as a transient unit: waits for the first dpkg that unpacks a package, kills it.
const INTERRUPTER = [
  "systemd-run --unit=gpuhost-interrupt --collect sh -c",
  `'until pid=$(pgrep -of "^/usr/bin/dpkg .*--unpack"); do sleep 0.02; done; kill -9 "$pid"; echo "killed dpkg $pid"'`,
].join(" ");

describe.runIf(enabled)("testhost stack: an interrupted installation", () => {
  let f: TestHostFixture;

  beforeAll(async () => {
    f = await startTestHostFixture("interrupt");
  }, 30 * 60_000);

  afterAll(async () => {
    await f?.stop();
  }, 120_000);

  it(
    "a pulumi up whose dpkg is killed mid-unpack fails and leaves the toolkit unfinished",
    async () => {
      await f.host.execOk(INTERRUPTER);
      const up = await f.stack.pulumi("up", "--yes", "--skip-preview");
      const log = (await f.host.execOk("journalctl -u gpuhost-interrupt --no-pager -o cat")).stdout;
      expect(log).toMatch(/killed dpkg \d+/);
      expect(up.code, up.stdout).not.toBe(0);
      expect(up.stdout + up.stderr).toMatch(/testhost-toolkit-install/);
      // the toolkit never got whole: its meta package is not installed
      const status = await f.host.exec("dpkg-query -W -f='${Status}' cuda-toolkit-13-0");
      expect(status.stdout).not.toBe("install ok installed");
    },
    STEP,
  );

  it(
    "the next pulumi up converges: the toolkit is whole, dpkg is clean, the gate passes",
    async () => {
      await f.stack.pulumiOk("up", "--yes", "--skip-preview");
      expect((await f.host.execOk("dpkg --audit")).stdout.trim()).toBe("");
      expect((await f.host.execOk("dpkg-query -W -f='${Status}' cuda-toolkit-13-0")).stdout).toBe(
        "install ok installed",
      );
      const out = (await f.stack.outputs()).gpuHosts as Record<string, Record<string, unknown>>;
      expect(out.testhost.generating).toBe(true);
      const again = await f.stack.refreshPreview();
      expect(again.code, again.stdout + again.stderr).toBe(0);
    },
    STEP,
  );
});
