// The services' host scripts, run for real with bash on a temporary simulated root. systemctl is a
// recording stub here (named so): the real systemd is exercised by the test-host suite.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { shellcheckFindings } from "../support/run";
import { removeSandbox, scriptSandbox } from "../support/script-sandbox";
import { renderInvocation } from "../../components/host/invocation";
import { ROOT } from "../config/stacks";

const SCRIPTS = path.join(ROOT, "components/services/scripts");
const ENV_SCRIPTS = path.join(ROOT, "components/serving-env/scripts");
let root: string;
let stubs: string;
let marker: string;

beforeEach(() => {
  ({ root, stubs, marker } = scriptSandbox());
  // Recording systemctl stub: logs each call; is-active answers from a state file.
  fs.writeFileSync(
    path.join(stubs, "systemctl"),
    `#!/bin/bash\necho "$*" >> "${root}/systemctl.log"\nif [[ "$1" == is-active ]]; then grep -qx "\${@: -1}" "${root}/active" 2>/dev/null; exit; fi\nif [[ "$1" == start || "$1" == restart ]]; then echo "$2" >> "${root}/active"; fi\nif [[ "$1" == stop ]]; then grep -vx "$2" "${root}/active" > "${root}/active.new" 2>/dev/null; mv "${root}/active.new" "${root}/active" 2>/dev/null; fi\nexit 0\n`,
    { mode: 0o755 },
  );
});
afterEach(() => removeSandbox({ root, stubs, marker }));

/** Runs a script exactly as hostScript renders it (base64 inside, each argument quoted). */
function run(script: string, args: string[], env: Record<string, string> = {}, input?: string) {
  const text = fs.readFileSync(script, "utf8");
  const cmd = renderInvocation({
    scriptText: text,
    scriptName: path.basename(script),
    args,
    environment: { GPUHOST_ROOT: root, ...env },
    pathPrefix: stubs,
  });
  const r = spawnSync("/bin/sh", ["-c", cmd], { encoding: "utf8", input });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
const calls = () =>
  fs.existsSync(`${root}/systemctl.log`) ? fs.readFileSync(`${root}/systemctl.log`, "utf8").trim().split("\n") : [];
const b64 = (s: string) => Buffer.from(s).toString("base64");

describe("shellcheck", () => {
  const all = [SCRIPTS, ENV_SCRIPTS].flatMap((d) =>
    fs
      .readdirSync(d)
      .filter((f) => f.endsWith(".sh"))
      .map((f) => path.join(d, f)),
  );
  it.each(all)("%s is shellcheck-clean and strict", async (file) => {
    expect(await shellcheckFindings([file])).toBe("");
    expect(fs.readFileSync(file, "utf8")).toMatch(/^#!\/usr\/bin\/env bash\n(#.*\n)*set -euo pipefail$/m);
  });
});

describe("install-unit.sh", () => {
  it("writes the unit and reloads systemd once; a second run changes nothing", () => {
    const first = run(`${SCRIPTS}/install-unit.sh`, [
      "sglang-autoregressive.service",
      b64("[Service]\nExecStart=/bin/true\n"),
    ]);
    expect(first).toMatchObject({ code: 0, stdout: "changed=true\n" });
    expect(fs.readFileSync(`${root}/etc/systemd/system/sglang-autoregressive.service`, "utf8")).toBe(
      "[Service]\nExecStart=/bin/true\n",
    );
    const second = run(`${SCRIPTS}/install-unit.sh`, [
      "sglang-autoregressive.service",
      b64("[Service]\nExecStart=/bin/true\n"),
    ]);
    expect(second.stdout).toBe("changed=false\n");
    expect(calls()).toEqual(["daemon-reload"]);
  });

  it("refuses a hostile unit name and runs nothing", () => {
    const r = run(`${SCRIPTS}/install-unit.sh`, [`x.service; touch ${marker}`, b64("x")]);
    expect(r.code).toBe(2);
    expect(fs.existsSync(marker)).toBe(false);
    expect(calls()).toEqual([]);
  });
});

describe("activate.sh: exactly one service, restarted only when its stamp changed", () => {
  const S1 = "a".repeat(64);
  const S2 = "b".repeat(64);
  beforeEach(() => {
    for (const k of ["autoregressive", "eagle3"])
      run(`${SCRIPTS}/install-unit.sh`, [`sglang-${k}.service`, b64(`# ${k}\n`)]);
    fs.rmSync(`${root}/systemctl.log`);
  });

  it("first run starts the active one; the same stamp again does nothing; a new stamp restarts", () => {
    const activate = (stamp: string) =>
      run(`${SCRIPTS}/activate.sh`, ["sglang-autoregressive.service", stamp, "sglang-eagle3.service"]).stdout;
    const activation = (stdout: string) => /^activation=(\S+)$/m.exec(stdout)?.[1];
    const first = activate(S1);
    expect(first).toContain("restarted=true");
    const again = activate(S1);
    expect(again).toContain("restarted=false");
    const changed = activate(S2);
    expect(changed).toContain("restarted=true (unit or environment changed)");
    // Each start gets a new activation id, a run that starts nothing keeps it: VerifiedGeneration
    // records the id it verified. Back to S1 (a reverted rollout) is a start, with a fresh id.
    expect(activation(first)).toMatch(/^\d{8}T\d{6}\.\d{9}Z-\d+$/);
    expect(activation(again)).toBe(activation(first));
    expect(activation(changed)).not.toBe(activation(first));
    const reverted = activate(S1);
    expect(activation(reverted)).not.toBe(activation(changed));
    expect(activation(reverted)).not.toBe(activation(first));
    expect(calls().filter((c) => c.startsWith("restart"))).toEqual([
      "restart sglang-autoregressive.service",
      "restart sglang-autoregressive.service",
      "restart sglang-autoregressive.service",
    ]);
    // the stamp (it follows a keyed hash of the API key) is root-only on the host
    const stamps = `${root}/var/lib/gpuhost/units`;
    expect(fs.statSync(stamps).mode & 0o777).toBe(0o700);
    expect(fs.statSync(`${stamps}/sglang-autoregressive.service.stamp`).mode & 0o777).toBe(0o600);
  });

  it("a stopped service with an unchanged stamp is started, not restarted", () => {
    const before = run(`${SCRIPTS}/activate.sh`, ["sglang-autoregressive.service", S1]).stdout;
    fs.writeFileSync(`${root}/active`, "");
    const started = run(`${SCRIPTS}/activate.sh`, ["sglang-autoregressive.service", S1]).stdout;
    expect(started).toContain("restarted=true (was not running)");
    // a start too: a new activation id, so the gate runs again
    expect(/^activation=(\S+)$/m.exec(started)?.[1]).not.toBe(/^activation=(\S+)$/m.exec(before)?.[1]);
    // A unit that crashed into its start limit refuses a plain start: the failure is cleared first.
    const calls = fs.readFileSync(`${root}/systemctl.log`, "utf8").trim().split("\n");
    expect(calls.slice(-2)).toEqual([
      "reset-failed sglang-autoregressive.service",
      "start sglang-autoregressive.service",
    ]);
  });

  it("switching stops and disables the other service, then starts the new one", () => {
    run(`${SCRIPTS}/activate.sh`, [
      "sglang-autoregressive.service",
      S1,
      "sglang-eagle3.service",
      "sglang-dflash.service",
    ]);
    fs.rmSync(`${root}/systemctl.log`);
    run(`${SCRIPTS}/activate.sh`, [
      "sglang-eagle3.service",
      S2,
      "sglang-autoregressive.service",
      "sglang-dflash.service",
    ]);
    expect(calls()).toEqual([
      "stop sglang-autoregressive.service",
      "disable sglang-autoregressive.service",
      "enable sglang-eagle3.service",
      "restart sglang-eagle3.service",
    ]);
    expect(fs.readFileSync(`${root}/active`, "utf8").trim()).toBe("sglang-eagle3.service");
  });

  it("refuses a hostile stamp or unit name and runs nothing", () => {
    expect(run(`${SCRIPTS}/activate.sh`, ["sglang-autoregressive.service", `$(touch ${marker})`]).code).toBe(2);
    expect(run(`${SCRIPTS}/activate.sh`, ["sglang-autoregressive.service", S1, `; touch ${marker}`]).code).toBe(2);
    expect(fs.existsSync(marker)).toBe(false);
    expect(calls()).toEqual([]);
  });
});

describe("remove-unit.sh", () => {
  it("stops, disables and removes; a second run is a no-op", () => {
    run(`${SCRIPTS}/install-unit.sh`, ["sglang-dflash.service", b64("# d\n")]);
    expect(run(`${SCRIPTS}/remove-unit.sh`, ["sglang-dflash.service"]).stdout).toBe("changed=true\n");
    expect(fs.existsSync(`${root}/etc/systemd/system/sglang-dflash.service`)).toBe(false);
    expect(run(`${SCRIPTS}/remove-unit.sh`, ["sglang-dflash.service"]).stdout).toBe("changed=false\n");
    expect(calls()).toContain("stop sglang-dflash.service");
  });
});

describe("api-key-file.sh", () => {
  it("writes a 0600 SGLang config file from standard input; the same key again changes nothing", () => {
    const key = "0123456789abcdef0123456789abcdef";
    const legacy = `${root}/etc/gpuhost/sglang-api-key.env`;
    fs.mkdirSync(path.dirname(legacy), { recursive: true });
    fs.writeFileSync(legacy, `SGLANG_API_KEY=${key}\n`);
    expect(run(`${SCRIPTS}/api-key-file.sh`, ["/etc/gpuhost/sglang-api-key.yaml"], {}, `${key}\n`).stdout).toBe(
      "changed=true\n",
    );
    const file = `${root}/etc/gpuhost/sglang-api-key.yaml`;
    expect(fs.readFileSync(file, "utf8")).toMatch(new RegExp(`^api-key: "${key}"$`, "m"));
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    // the EnvironmentFile of earlier versions is gone: no second copy of the key
    expect(fs.existsSync(legacy)).toBe(false);
    expect(run(`${SCRIPTS}/api-key-file.sh`, ["/etc/gpuhost/sglang-api-key.yaml"], {}, key).stdout).toBe(
      "changed=false\n",
    );
    expect(run(`${SCRIPTS}/remove-api-key-file.sh`, ["/etc/gpuhost/sglang-api-key.yaml"]).stdout).toBe(
      "changed=true\n",
    );
    expect(fs.existsSync(file)).toBe(false);
  });

  it("--check compares the file with the key on stdin (missing, match, differs: content or mode) and writes nothing", () => {
    const key = "0123456789abcdef0123456789abcdef";
    const p = "/etc/gpuhost/sglang-api-key.yaml";
    const file = `${root}${p}`;
    const check = (k = key) => run(`${SCRIPTS}/api-key-file.sh`, ["--check", p], {}, `${k}\n`).stdout;
    expect(check()).toBe("state=missing\n");
    expect(fs.existsSync(file)).toBe(false);
    run(`${SCRIPTS}/api-key-file.sh`, [p], {}, `${key}\n`);
    expect(check()).toBe("state=match\n");
    expect(check(`${key}x`)).toBe("state=differs\n");
    fs.chmodSync(file, 0o644);
    expect(check()).toBe("state=differs\n");
    // the repair: the same write fixes the mode too
    expect(run(`${SCRIPTS}/api-key-file.sh`, [p], {}, `${key}\n`).stdout).toBe("changed=true\n");
    expect(check()).toBe("state=match\n");
    fs.appendFileSync(file, "api-key: other\n");
    expect(check()).toBe("state=differs\n");
  });

  it("--check PATH COPY also compares systemd's copy of the credential (the key the service started with)", () => {
    const key = "0123456789abcdef0123456789abcdef";
    const p = "/etc/gpuhost/sglang-api-key.yaml";
    const copy = "/run/credentials/sglang-autoregressive.service/sglang-server-args.yaml";
    const check = () => run(`${SCRIPTS}/api-key-file.sh`, ["--check", p, copy], {}, `${key}\n`).stdout;
    run(`${SCRIPTS}/api-key-file.sh`, [p], {}, `${key}\n`);
    // No copy: the unit is not running (systemd removes it at stop).
    expect(check()).toBe("state=match\nrunning=unknown\n");
    fs.mkdirSync(path.dirname(`${root}${copy}`), { recursive: true });
    fs.copyFileSync(`${root}${p}`, `${root}${copy}`);
    fs.chmodSync(`${root}${copy}`, 0o400);
    expect(check()).toBe("state=match\nrunning=match\n");
    // The file rewritten with another key after the start: the service still runs with the copy.
    run(`${SCRIPTS}/api-key-file.sh`, [p], {}, `${key}x\n`);
    expect(check()).toBe("state=differs\nrunning=match\n");
    run(`${SCRIPTS}/api-key-file.sh`, [p], {}, `${key}\n`);
    fs.rmSync(`${root}${copy}`);
    fs.writeFileSync(`${root}${copy}`, 'api-key: "another"\n');
    expect(check()).toBe("state=match\nrunning=differs\n");
    expect(run(`${SCRIPTS}/api-key-file.sh`, ["--check", p, `/run/x; touch ${marker}`], {}, `${key}\n`).code).toBe(2);
  });

  it("refuses a key that would need quoting, and a hostile path; nothing is executed or written", () => {
    const r = run(`${SCRIPTS}/api-key-file.sh`, ["/etc/gpuhost/k.env"], {}, `abc$(touch ${marker}) X=1\n`);
    expect(r.code).toBe(2);
    expect(run(`${SCRIPTS}/api-key-file.sh`, ["/etc/gpuhost/k.env"], {}, "").code).toBe(2);
    expect(run(`${SCRIPTS}/api-key-file.sh`, [`/etc/x; touch ${marker}`], {}, "abcdefabcdefabcdef\n").code).toBe(2);
    expect(fs.existsSync(marker)).toBe(false);
    expect(fs.existsSync(`${root}/etc/gpuhost/k.env`)).toBe(false);
  });
});

describe("model-config.sh (the roofline's facts, read on the host; issue 28)", () => {
  const config = '{"model_type": "llama", "num_hidden_layers": 32}\n';
  const read = (model: string) =>
    Object.fromEntries(
      run(`${SCRIPTS}/model-config.sh`, [model, "/var/lib/gpuhost"])
        .stdout.trim()
        .split("\n")
        .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
    );

  it("reads a local folder's config.json, and says where it looked when there is none", () => {
    expect(read("/models/llama")).toEqual({ missing: "/models/llama/config.json" });
    fs.mkdirSync(`${root}/models/llama`, { recursive: true });
    fs.writeFileSync(`${root}/models/llama/config.json`, config);
    expect(read("/models/llama")).toEqual({ found: "/models/llama/config.json", config: b64(config) });
  });

  it("reads a repository id's newest snapshot in the service user's Hugging Face cache", () => {
    const hub = `${root}/var/lib/gpuhost/.cache/huggingface/hub/models--org--model/snapshots`;
    expect(read("org/model")).toEqual({
      missing: "/var/lib/gpuhost/.cache/huggingface/hub/models--org--model/snapshots/*/config.json",
    });
    fs.mkdirSync(`${hub}/old`, { recursive: true });
    fs.mkdirSync(`${hub}/new`, { recursive: true });
    fs.writeFileSync(`${hub}/old/config.json`, "{}");
    fs.utimesSync(`${hub}/old/config.json`, new Date(2020, 0, 1), new Date(2020, 0, 1));
    fs.writeFileSync(`${hub}/new/config.json`, config);
    expect(read("org/model")).toEqual({
      found: "/var/lib/gpuhost/.cache/huggingface/hub/models--org--model/snapshots/new/config.json",
      config: b64(config),
    });
  });

  it("does not pass on a file over 1 MiB, and runs nothing from a hostile model path", () => {
    fs.mkdirSync(`${root}/models/big`, { recursive: true });
    fs.writeFileSync(`${root}/models/big/config.json`, "x".repeat(1048577));
    expect(read("/models/big")).toEqual({ toolarge: "/models/big/config.json" });
    const r = run(`${SCRIPTS}/model-config.sh`, [`/m$(touch ${marker})`, "/var/lib/gpuhost"]);
    expect(r.code).toBe(0);
    expect(fs.existsSync(marker)).toBe(false);
  });
});
