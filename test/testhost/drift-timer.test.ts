/**
 * Issue 27: the drift check's timer under real systemd writes the textfile with nobody running a
 * command. What runs where:
 * - this machine: the engine (`pulumi up` of a throwaway `sim` stack, once, as setup) and the stack's
 *   simulated host (a folder under .gpuhost/sim-hosts);
 * - the test host (systemd-nspawn, systemd as PID 1): the DriftCheck's two units, installed by that
 *   `pulumi up` over SSH (`operations.driftCheck.machine: { kind: ssh }`, host key pinned) through
 *   services/scripts/install-unit.sh and enable-timer.sh; every 10 s its timer starts the service,
 *   which runs `gpuhost drift --stack S --textfile DIR` from this checkout, this machine's Node.js 24
 *   (the container's is 18) and the stack's state folder, all mounted into the container at the same
 *   paths (the checkout read-only), with the passphrase as a systemd credential from a root-only file.
 *   The simulated host's folder is mounted too: the check inside reads the same files as `up` wrote.
 * After setup the test runs nothing: it removes curand.h from the simulated host (the drift) and
 * reads the container's textfile until `gpuhost_drift{...,item="files.<curand.h>"} 1` appears, then
 * asks systemd (`systemctl show`) that the timer triggered the service and the service ended as a
 * success with status 1 (drift found).
 */
import { promises as fs, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import * as path from "node:path";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { driftCheckUnitNames } from "../../components/drift-check/render";
import { execOnHost } from "../../components/host/exec";
import { PROJECT_ROOT, pulumiBin } from "../../engine/pulumi";
import { freeLocalPort } from "../../ports";
import { simulatedConnection } from "../../sim-host/platform";
import { TEST_PASSPHRASE } from "../support/engine";
import { createTestStack, type TestStack } from "../support/stack";
import { bootTestHost, requireTestHost, type TestHost } from "./harness";

const enabled = requireTestHost();
const CURAND_H = "/usr/local/cuda-13.0/include/curand.h";
/** Where the check writes on the test host (the schema's default, node_exporter's textfile folder). */
const TEXTFILE_DIR = "/var/lib/prometheus/node-exporter";
/** On the test host only: the stack's passphrase, root 0600, handed to the service as a credential. */
const PASSPHRASE_FILE = "/etc/gpuhost-test/drift-passphrase";
/** How long one check may take to show up: the timer's 10 s plus a refresh of the sim stack under load. */
const CHECK_BOUND_MS = 240_000;

describe.runIf(enabled)("operations.driftCheck: the timer on a real systemd writes the textfile by itself", () => {
  // Under the project's .gpuhost/ (a simulated host's root must be, #12.6); not under /tmp, which the
  // service's PrivateTmp=yes replaces with its own, so the state folder must live elsewhere too.
  const gpuhostDir = path.join(PROJECT_ROOT, ".gpuhost");
  mkdirSync(path.join(gpuhostDir, "sim-hosts"), { recursive: true });
  mkdirSync(path.join(gpuhostDir, "test-stacks"), { recursive: true });
  const hostRoot = mkdtempSync(path.join(gpuhostDir, "sim-hosts", "timer-"));
  let stack: TestStack | undefined;
  let host: TestHost | undefined;
  let textfile = "";
  const names = () => driftCheckUnitNames(stack!.stack);
  const read = () => fs.readFile(textfile, "utf8").catch(() => "");
  const sample = (text: string, metric: string) =>
    new RegExp(`^${metric}\\{stack="${stack!.stack}"\\} (\\S+)$`, "m").exec(text)?.[1];
  const curandLine = () =>
    new RegExp(
      `^gpuhost_drift\\{stack="${stack!.stack}",host="[^"]+",item="files\\.${CURAND_H.replace(/\./g, "\\.")}"\\} 1$`,
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
    const journal = await host!.exec(`journalctl -u ${names().service} --no-pager -n 40`, { timeoutMs: 30_000 });
    throw new Error(
      `the timer's textfile did not show ${what} within ${CHECK_BOUND_MS / 1000} s\n--- ${textfile}:\n${text}\n--- journal:\n${journal.stdout}${journal.stderr}`,
    );
  }

  beforeAll(async () => {
    stack = await createTestStack(
      "sim",
      [
        { path: "gpuhost:services.port", value: String(await freeLocalPort()) },
        { path: "gpuhost:hosts[0].connection.root", value: hostRoot },
        { path: "gpuhost:apiKey", value: `sim-timer-${randomBytes(16).toString("hex")}`, secret: true },
      ],
      600_000,
      "stand-ins",
      path.join(gpuhostDir, "test-stacks"),
    );
    // The check runs `pulumi refresh` in the project folder (projectDir), which reads the stack's config
    // from the project's stacks/ (Pulumi.yaml's stackConfigDir), as on an operator's machine; this
    // stack keeps its config in its own folder, so the container sees a stacks/ holding a link to it.
    const stacksView = path.join(stack.dir, "project-stacks");
    await fs.mkdir(stacksView);
    const stackConfig = `Pulumi.${stack.stack}.yaml`;
    await fs.symlink(path.join(stack.dir, stackConfig), path.join(stacksView, stackConfig));
    host = await bootTestHost({
      name: "drift",
      binds: [
        { path: PROJECT_ROOT, readOnly: true },
        { path: path.join(PROJECT_ROOT, "stacks"), from: stacksView, readOnly: true },
        // this machine's Node.js 24 (process.execPath's folder): the CLI's and the engine's plugins'
        { path: path.dirname(path.dirname(process.execPath)), readOnly: true },
        { path: hostRoot, readOnly: false },
        // the state folder: the engine takes its lock there
        { path: stack.dir, readOnly: false },
      ],
    });
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
    const at = "gpuhost:operations.driftCheck";
    await stack.ok("config", "rm", "--path", `${at}.machine.name`);
    const settings: Array<[string, string, ("int" | "plaintext")?]> = [
      ["machine.kind", "ssh"],
      ["machine.host", host.host],
      ["machine.port", String(host.port), "int"],
      ["machine.user", "root"],
      ["machine.hostKey", host.hostKey],
      ["onCalendar", "*:*:0/10"],
      ["randomizedDelaySec", "0", "int"],
      ["timeoutSec", "600", "int"],
      ["user", "root"],
      ["nodePath", process.execPath],
      ["backendUrl", `file://${stack.opts.stateDir}`],
      // a path, which the CLI takes for a secret by its key's name: --plaintext says it is not one
      ["passphraseFile", PASSPHRASE_FILE, "plaintext"],
    ];
    for (const [key, value, type] of settings)
      await stack.ok(
        "config",
        "set",
        "--path",
        `${at}.${key}`,
        value,
        ...(type === "plaintext" ? ["--plaintext"] : type ? ["--type", type] : []),
      );
    // set-all's key=value form: a value starting with "-----BEGIN" would read as a flag to `config set`
    await stack.ok("config", "set-all", "--secret", `gpuhost:sshPrivateKey=${host.privateKey}`);
    await stack.ok("up", "--yes", "--skip-preview");
    textfile = path.join(host.rootDir, TEXTFILE_DIR.slice(1), `gpuhost-drift-${stack.stack}.prom`);
  }, 900_000);

  afterAll(async () => {
    try {
      // The timer would keep starting checks that hold the stack while it is destroyed.
      if (host && stack) await host.exec(`systemctl stop ${names().timer} ${names().service}`, { timeoutMs: 60_000 });
      await stack?.dispose();
    } finally {
      await host?.stop();
      rmSync(hostRoot, { recursive: true, force: true });
    }
  }, 600_000);

  it(
    "curand.h removed from the host: the next scheduled check writes gpuhost_drift ... 1 for it",
    async () => {
      // The first scheduled check: the stack as `up` left it, checked successfully, curand.h not named.
      const before = await waitForTextfile(
        "a successful check",
        (t) => sample(t, "gpuhost_drift_check_success") === "1",
      );
      expect(before).not.toMatch(curandLine());
      const removedAt = Date.now() / 1000;
      const rm = await execOnHost(simulatedConnection(hostRoot), `rm -f "$GPUHOST_ROOT${CURAND_H}"`, [], {
        timeoutMs: 60_000,
      });
      expect(rm.code, rm.stderr).toBe(0);

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
        const r = await host!.execOk(`systemctl show ${unit} ${props.map((p) => `-p ${p}`).join(" ")}`, {
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
      const triggered = await host!.execOk(
        `date +%s -d "$(systemctl show -p LastTriggerUSec --value ${names().timer})"`,
        { timeoutMs: 30_000 },
      );
      expect(Number(triggered.stdout.trim()), triggered.stdout).toBeGreaterThan(removedAt);
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
