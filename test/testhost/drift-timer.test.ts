/**
 * Issue 27: the drift check's timer under real systemd writes the textfile with nobody running a
 * command, for drift made on that real host. What runs where:
 * - this machine: the engine (`pulumi up` of a `testhost` stack, once, as setup), as on e2e.test.ts;
 * - the test host (systemd-nspawn, systemd as PID 1): NVIDIA's CUDA 13.0 packages installed by apt,
 *   the service, and the DriftCheck's two units (`operations.driftCheck.machine: { kind: host }`),
 *   installed by that `pulumi up` over SSH through services/scripts/install-unit.sh and
 *   enable-timer.sh. Every 10 s its timer starts the service, which runs
 *   `gpuhost drift --stack testhost --textfile DIR` from this checkout with this machine's Node.js 24
 *   (the container's is 18) and the stack's state folder, all mounted into the container at the same
 *   paths (the checkout read-only), with the passphrase as a systemd credential from a root-only
 *   file. Its refresh reaches the host over SSH on loopback, as from an operations machine.
 * - Issue 42: the project the service runs is the checkout mounted at a folder under /tmp on the
 *   host (`projectDir`), wherever this clone lives: the service has PrivateTmp=yes, so before the
 *   product bound such a folder into it the check never ran ("Cannot find module
 *   '/tmp/.../dist/cli/gpuhost.js'", status 1, read as drift found) and no alert could fire. The
 *   timer's installation wrote its installed series there before any check.
 * After setup the test runs one command on the host, which is the drift: it deletes NVIDIA's
 * curand.h from the installed toolkit. It then only reads the container's textfile until
 * `gpuhost_drift{...,item="files.<curand.h>"} 1` appears, and asks systemd (`systemctl show`) that
 * the timer triggered the service and the service ended as a success with status 1 (drift found).
 */
import { promises as fs, mkdirSync, symlinkSync } from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { driftCheckUnitNames } from "../../components/drift-check/render";
import { PROJECT_ROOT, pulumiBin } from "../../engine/pulumi";
import { TEST_PASSPHRASE } from "../support/engine";
import { requireTestHost } from "./harness";
import { STACK, startTestHostFixture, type TestHostFixture } from "./testhost-stack";

const enabled = requireTestHost();
const CURAND_H = "/usr/local/cuda-13.0/include/curand.h";
/** Where the check writes on the test host (the schema's default, node_exporter's textfile folder). */
const TEXTFILE_DIR = "/var/lib/prometheus/node-exporter";
/** On the test host only: the stack's passphrase, root 0600, handed to the service as a credential. */
const PASSPHRASE_FILE = "/etc/gpuhost-test/drift-passphrase";
/** How long one check may take to show up: the timer's 10 s plus a refresh of the stack under load. */
const CHECK_BOUND_MS = 240_000;
/** On the test host: where the check's project lies, under /tmp as a `mktemp -d` clone would. */
const TMP_PROJECT = "/tmp/tmp.gpuhost-clone/gpuhost";

describe.runIf(enabled)("operations.driftCheck: the timer on a real systemd host writes its drift by itself", () => {
  // Under the project's .gpuhost/, not under /tmp: the service's PrivateTmp=yes replaces /tmp with
  // its own, so the stack's state folder must live elsewhere.
  const stackParent = path.join(PROJECT_ROOT, ".gpuhost", "test-stacks");
  mkdirSync(stackParent, { recursive: true });
  let f: TestHostFixture | undefined;
  /** The stacks/ the check sees: a link to the stack's config, made before the host mounts it. */
  const stacksView = (stackDir: string) => {
    const view = path.join(stackDir, "project-stacks");
    const config = `Pulumi.${STACK}.yaml`;
    mkdirSync(view);
    symlinkSync(path.join(stackDir, config), path.join(view, config));
    return view;
  };
  let textfile = "";
  const names = () => driftCheckUnitNames(STACK);
  const read = () => fs.readFile(textfile, "utf8").catch(() => "");
  const sample = (text: string, metric: string) =>
    new RegExp(`^${metric}\\{stack="${STACK}"\\} (\\S+)$`, "m").exec(text)?.[1];
  const curandLine = () =>
    new RegExp(
      `^gpuhost_drift\\{stack="${STACK}",host="ssh root@${f!.host.host}:${f!.host.port}",item="files\\.${CURAND_H.replace(/\./g, "\\.")}"\\} 1$`,
      "m",
    );

  /** Reads the textfile until `done` holds, or fails after the bound naming what it last saw. */
  async function waitForTextfile(what: string, done: (text: string) => boolean): Promise<string> {
    const deadline = Date.now() + CHECK_BOUND_MS;
    let text = "";
    while (Date.now() < deadline) {
      text = await read();
      if (done(text)) return text;
      await new Promise((r) => setTimeout(r, 2000));
    }
    const journal = await f!.host.exec(`journalctl -u ${names().service} --no-pager -n 40`, { timeoutMs: 30_000 });
    throw new Error(
      `the timer's textfile did not show ${what} within ${CHECK_BOUND_MS / 1000} s\n--- ${textfile}:\n${text}\n--- journal:\n${journal.stdout}${journal.stderr}`,
    );
  }

  beforeAll(async () => {
    f = await startTestHostFixture(
      "drift",
      {
        operations: {
          driftCheck: {
            machine: { kind: "host", name: "testhost" },
            onCalendar: "*:*:0/10",
            randomizedDelaySec: 0,
            timeoutSec: 600,
            user: "root",
            nodePath: process.execPath,
            passphraseFile: PASSPHRASE_FILE,
            projectDir: TMP_PROJECT,
          },
        },
      },
      {
        stackParent,
        // The check runs `pulumi refresh` in the project folder (projectDir), which reads the stack's
        // config from the project's stacks/ (Pulumi.yaml's stackConfigDir), as on an operator's
        // machine; this stack keeps its config in its own folder, so the container sees a stacks/
        // holding a link to it.
        binds: (stackDir) => [
          { path: PROJECT_ROOT, readOnly: true },
          { path: path.join(PROJECT_ROOT, "stacks"), from: stacksView(stackDir), readOnly: true },
          // the same checkout under /tmp, where the check runs it from (projectDir)
          { path: TMP_PROJECT, from: PROJECT_ROOT, readOnly: true },
          { path: path.join(TMP_PROJECT, "stacks"), from: path.join(stackDir, "project-stacks"), readOnly: true },
          // this machine's Node.js 24 (process.execPath's folder): the CLI's and the engine's plugins'
          { path: path.dirname(path.dirname(process.execPath)), readOnly: true },
          // the state folder: the engine takes its lock there
          { path: stackDir, readOnly: false },
        ],
      },
    );
    const { host, stack } = f;
    await stack.setConfig({ operations: { driftCheck: { backendUrl: `file://${stack.opts.stateDir}` } } });
    // The engine set up on the check's machine, as engine/setup.sh does: the command provider the
    // program's @pulumi/command asks for, registered in root's plugin cache there from this checkout.
    const commandVersion = (
      JSON.parse(await fs.readFile(path.join(PROJECT_ROOT, "node_modules/@pulumi/command/package.json"), "utf8")) as {
        version: string;
      }
    ).version;
    await host.execOk(
      `PULUMI_SKIP_UPDATE_CHECK=true ${pulumiBin()} plugin install resource command ${commandVersion} --file ${path.join(PROJECT_ROOT, ".gpuhost/engine/plugins/pulumi-resource-command")}`,
      { timeoutMs: 120_000 },
    );
    await host.execOk(`install -d -m 0700 ${path.dirname(PASSPHRASE_FILE)} && umask 077 && cat > ${PASSPHRASE_FILE}`, {
      input: TEST_PASSPHRASE,
    });
    await stack.pulumiOk("up", "--yes", "--skip-preview");
    textfile = path.join(host.rootDir, TEXTFILE_DIR.slice(1), `gpuhost-drift-${STACK}.prom`);
  }, 1_200_000);

  afterAll(async () => {
    try {
      // The timer would keep starting checks while the host goes down.
      if (f) await f.host.exec(`systemctl stop ${names().timer} ${names().service}`, { timeoutMs: 60_000 });
    } finally {
      await f?.stop();
    }
  }, 600_000);

  it(
    "NVIDIA's curand.h deleted on the host: the next scheduled check writes gpuhost_drift ... 1 for it",
    async () => {
      // the series GpuhostDriftCheckNeverRan compares against, written by the timer's installation
      const installed = await fs.readFile(
        path.join(f!.host.rootDir, TEXTFILE_DIR.slice(1), `gpuhost-drift-timer@${STACK}.prom`),
        "utf8",
      );
      expect(installed).toMatch(
        new RegExp(`^gpuhost_drift_check_installed_timestamp_seconds\\{stack="${STACK}"\\} \\d+$`, "m"),
      );
      // the unit runs the project from under /tmp, past its PrivateTmp=yes
      const unit = await f!.host.execOk(`systemctl cat ${names().service}`, { timeoutMs: 30_000 });
      expect(unit.stdout).toContain(`ExecStart=${process.execPath} ${TMP_PROJECT}/dist/cli/gpuhost.js drift`);
      expect(unit.stdout).toMatch(/^PrivateTmp=yes$/m);
      // The first scheduled check: the stack as `up` left it, checked successfully, curand.h not named.
      const before = await waitForTextfile(
        "a successful check",
        (t) => sample(t, "gpuhost_drift_check_success") === "1",
      );
      expect(before).not.toMatch(curandLine());
      const removedAt = Date.now() / 1000;
      // the drift, made on the host itself: the file dpkg installed from NVIDIA's libcurand-dev-13-0
      await f!.host.execOk(`test -f ${CURAND_H} && rm ${CURAND_H}`, { timeoutMs: 60_000 });

      // From here the test only reads: a check the timer started after the removal names the header.
      const after = await waitForTextfile(
        `${CURAND_H} as drift from a check started after its removal`,
        (t) => curandLine().test(t) && Number(sample(t, "gpuhost_drift_check_timestamp_seconds")) > removedAt,
      );
      expect(sample(after, "gpuhost_drift_check_success")).toBe("1");
      expect(after).not.toContain("gpuhost_drift_check_failure_reason{");

      // systemd, not the test, ran it: the timer triggered after the removal, and its service's last
      // run ended as a success (SuccessExitStatus=1: drift found is a verdict) with status 1. A run the
      // timer started since may still be going: the service is read between two runs (10 s apart).
      const show = async (unit: string, props: string[]) => {
        const r = await f!.host.execOk(`systemctl show ${unit} ${props.map((p) => `-p ${p}`).join(" ")}`, {
          timeoutMs: 30_000,
        });
        return Object.fromEntries(
          r.stdout
            .trim()
            .split("\n")
            .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
        ) as Record<string, string>;
      };
      const timer = await show(names().timer, ["ActiveState", "UnitFileState"]);
      expect(timer).toEqual({ ActiveState: "active", UnitFileState: "enabled" });
      // LastTriggerUSec as `date` reads it (systemd prints it as a date), in seconds since the epoch
      const triggered = await f!.host.execOk(
        `date +%s -d "$(systemctl show -p LastTriggerUSec --value ${names().timer})"`,
        { timeoutMs: 30_000 },
      );
      expect(Number(triggered.stdout.trim()), triggered.stdout).toBeGreaterThan(removedAt);
      // The timer stopped, so the run going now is the last: a check that takes longer than the
      // timer's 10 s (a loaded machine) is followed by the next at once, and the service is never
      // seen inactive between two runs. Stopping the timer does not stop the run.
      await f!.host.execOk(`systemctl stop ${names().timer}`, { timeoutMs: 60_000 });
      const deadline = Date.now() + CHECK_BOUND_MS;
      let service = await show(names().service, ["ActiveState", "Result", "ExecMainStatus"]);
      while (service.ActiveState !== "inactive" && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 1000));
        service = await show(names().service, ["ActiveState", "Result", "ExecMainStatus"]);
      }
      expect(service).toEqual({ ActiveState: "inactive", Result: "success", ExecMainStatus: "1" });
    },
    2 * CHECK_BOUND_MS + 60_000,
  );
});
