// The serving environment's pure parts (pins, lock, keyed JIT cache) and its host scripts, run with
// bash on a temporary simulated root exactly as hostScript renders them.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parseConfig } from "../../stack/config";
import { renderInvocation } from "../../components/host/invocation";
import {
  checkHashLock,
  checkTorchMatchesToolkit,
  environmentLock,
  hasRemoteIndex,
  indexArgs,
  jitWorkspace,
  pinsLock,
  requirements,
  torchCudaRelease,
} from "../../components/serving-env/lock";
import { ROOT } from "../config/stacks";
import { removeSandbox, scriptSandbox } from "../support/script-sandbox";
import { run as runChild } from "../support/run";

const SCRIPTS = path.join(ROOT, "components/serving-env/scripts");
const envOf = (environment: Record<string, unknown> = {}) =>
  parseConfig({ hosts: [{ name: "h", connection: { kind: "local" } }], environment }).environment;

describe("pins, lock and JIT workspace", () => {
  it("pins every package of the serving stack exactly", () => {
    expect(requirements(envOf({ packages: { flashinferJitCache: "0.7.2+cu130" } }))).toEqual([
      "torch==2.14.1+cu130",
      "sglang==0.5.23",
      "flashinfer-python==0.7.2",
      "flashinfer-jit-cache==0.7.2+cu130",
      "ninja==1.13.2",
    ]);
    expect(
      indexArgs(
        envOf({ pipIndexUrl: "file:///srv/pypi/simple/", pipExtraIndexUrls: ["https://wheels.example/cu130/"] }),
      ),
    ).toEqual(["--index-url", "file:///srv/pypi/simple/", "--extra-index-url", "https://wheels.example/cu130/"]);
  });

  it("refuses http:// indexes, naming the config path", () => {
    expect(() => envOf({ pipIndexUrl: "http://127.0.0.1:1/simple/" })).toThrow(
      /environment\.pipIndexUrl: must be https:\/\/ \(or file:\/\/ for an index on the host\): http:\/\/ is refused/,
    );
    expect(() => envOf({ pipExtraIndexUrls: ["https://ok.example/", "http://x.example/"] })).toThrow(
      /environment\.pipExtraIndexUrls\[1\]: must be https:\/\//,
    );
  });

  it("a remote index needs a hash lock that pins every configured package with a sha256", () => {
    expect(hasRemoteIndex(envOf())).toBe(true); // pip's default index
    expect(hasRemoteIndex(envOf({ pipIndexUrl: "file:///srv/pypi/simple/" }))).toBe(false);
    expect(hasRemoteIndex(envOf({ pipIndexUrl: "file:///srv/p/", pipExtraIndexUrls: ["https://x.example/"] }))).toBe(
      true,
    );
    const e = envOf();
    const h = (c: string) => `--hash=sha256:${c.repeat(64)}`;
    const good = requirements(e)
      .map((r, i) => `${r} \\\n    ${h(String(i))}`)
      .concat([`nvidia-cublas==13.0.1 ${h("a")}  # via torch`])
      .join("\n");
    expect(checkHashLock(good, e, "k")).toBe(good);
    expect(pinsLock(e, good)).not.toBe(pinsLock(e));
    expect(() => checkHashLock(good.replace(/--hash=sha256:0+/, ""), e, "k")).toThrow(
      "k: torch==2.14.1+cu130 has no --hash=sha256",
    );
    expect(() => checkHashLock(good.replace("sglang==0.5.23", "sglang==0.5.22"), e, "k")).toThrow(
      "k: must pin sglang==0.5.23 (from environment.packages), it pins 0.5.22",
    );
    expect(() => checkHashLock(`--index-url http://evil/\n${good}`, e, "k")).toThrow("only requirement lines");
    expect(() => checkHashLock(`requests>=2 ${h("b")}\n${good}`, e, "k")).toThrow("is not pinned with ==");
  });

  it("the shipped lock (requirements/sglang-0.5.23.lock.txt) hash-pins every default pin, torch's CUDA 13.0 build by its runtime", () => {
    const lock = fs.readFileSync(path.join(ROOT, "requirements/sglang-0.5.23.lock.txt"), "utf8");
    // Every package of the closure: torch's CUDA wheels and SGLang's kernels included.
    for (const name of ["torch", "sglang", "flashinfer-python", "ninja", "sglang-kernel", "nvidia-cudnn-cu13"])
      expect(lock).toMatch(new RegExp(`^${name}==\\S+ \\\\\\n    --hash=sha256:[0-9a-f]{64}`, "m"));
    // The index it came from serves torch 2.14.1 (a CUDA 13.0 build) without the +cu130 label: the
    // default pin accepts it because the lock's nvidia-cuda-runtime, torch's own runtime, is 13.0.
    expect(lock).toMatch(/^torch==2\.14\.1 \\$/m);
    expect(lock).toMatch(/^nvidia-cuda-runtime==13\.0\.\d+ \\$/m);
    expect(checkHashLock(lock, envOf(), "k")).toBe(lock);
    expect(checkHashLock(lock, envOf({ packages: { torch: "2.14.1" } }), "k")).toBe(lock);
    // A pin for another CUDA, or another torch, is still refused against it.
    expect(() => checkHashLock(lock, envOf({ packages: { torch: "2.14.1+cu128" } }), "k")).toThrow(
      "k: must pin torch==2.14.1+cu128 (from environment.packages), it pins 2.14.1, and its nvidia-cuda-runtime pin (13.0.96) is not CUDA 12.8",
    );
    expect(() => checkHashLock(lock, envOf({ packages: { torch: "2.14.0+cu130" } }), "k")).toThrow(
      "k: must pin torch==2.14.0+cu130 (from environment.packages), it pins 2.14.1",
    );
  });

  it("an unlabelled torch in a lock matches a +cuNNN pin only through the lock's CUDA runtime", () => {
    const e = envOf();
    const h = (s: string) => `--hash=sha256:${s.repeat(64).slice(0, 64)}`;
    const body = (torch: string, runtime?: string) =>
      requirements(e)
        .map((r, i) => (r.startsWith("torch==") ? `torch==${torch} ${h(String(i))}` : `${r} ${h(String(i))}`))
        .concat(runtime ? [`nvidia-cuda-runtime==${runtime} ${h("7")}  # via torch`] : [])
        .join("\n");
    expect(checkHashLock(body("2.14.1", "13.0.96"), e, "k")).toContain("torch==2.14.1 ");
    expect(() => checkHashLock(body("2.14.1"), e, "k")).toThrow("its nvidia-cuda-runtime pin (none) is not CUDA 13.0");
    expect(() => checkHashLock(body("2.14.1", "12.8.90"), e, "k")).toThrow(
      "its nvidia-cuda-runtime pin (12.8.90) is not CUDA 13.0",
    );
    expect(() => checkHashLock(body("2.14.1+cu128", "13.0.96"), e, "k")).toThrow("it pins 2.14.1+cu128");
  });

  it("torch must be the CUDA build of the toolkit, checked before any download", () => {
    expect(torchCudaRelease("2.14.1+cu130")).toBe("13.0");
    expect(torchCudaRelease("2.14.1+cu128")).toBe("12.8");
    expect(() => checkTorchMatchesToolkit("2.14.1+cu130", "13.0")).not.toThrow();
    expect(() => checkTorchMatchesToolkit("2.14.1+cu128", "13.0")).toThrow(
      "built for CUDA 12.8, but the toolkit is 13.0",
    );
    expect(() => checkTorchMatchesToolkit("2.14.1", "13.0")).toThrow(/not pinned to a CUDA build/);
  });

  it("the lock changes with any pin and with the toolkit; the venv's own lock only with pins", () => {
    const e = envOf();
    const l = environmentLock(e, "fp1");
    expect(l).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(environmentLock(e, "fp1")).toBe(l);
    expect(environmentLock(e, "fp2")).not.toBe(l);
    expect(environmentLock(envOf({ packages: { sglang: "0.5.22" } }), "fp1")).not.toBe(l);
    expect(pinsLock(e)).toBe(pinsLock(e));
    expect(pinsLock(envOf({ packages: { ninja: "1.13.0" } }))).not.toBe(pinsLock(e));
  });

  it("a changed toolkit gets a new JIT workspace (stale kernels impossible)", () => {
    const e = envOf();
    const a = jitWorkspace(e, "13.0", "13.0:cuda-toolkit-13-0=13.0.2-1");
    expect(a).toMatch(/^\/var\/cache\/gpuhost\/flashinfer\/cuda13\.0-[0-9a-f]{16}$/);
    expect(jitWorkspace(e, "13.0", "13.0:cuda-toolkit-13-0=13.0.3-1")).not.toBe(a);
    expect(jitWorkspace(e, "13.0", "13.0:cuda-toolkit-13-0=13.0.2-1")).toBe(a);
  });
});

describe("host scripts on a simulated root", () => {
  let root: string;
  let stubs: string;
  let marker: string;
  beforeEach(() => {
    ({ root, stubs, marker } = scriptSandbox());
    // Stubs (named so) that record any attempt to install: the simulated path must never reach them.
    for (const tool of ["pip", "pip3", "python3", "useradd"]) {
      fs.writeFileSync(path.join(stubs, tool), `#!/bin/sh\necho "${tool} $*" >> "${root}/installs.log"\nexit 1\n`, {
        mode: 0o755,
      });
    }
  });
  afterEach(() => {
    removeSandbox({ root, stubs, marker });
  });
  const run = (script: string, args: string[]) => {
    const cmd = renderInvocation({
      scriptText: fs.readFileSync(path.join(SCRIPTS, script), "utf8"),
      scriptName: script,
      args,
      environment: { GPUHOST_ROOT: root },
      pathPrefix: stubs,
    });
    const r = spawnSync("/bin/sh", ["-c", cmd], { encoding: "utf8" });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  };
  const installs = () => (fs.existsSync(`${root}/installs.log`) ? fs.readFileSync(`${root}/installs.log`, "utf8") : "");

  it("service-user.sh records the account once", () => {
    expect(run("service-user.sh", ["sglang", "/var/lib/sglang"]).stdout).toBe("changed=true\n");
    expect(run("service-user.sh", ["sglang", "/var/lib/sglang"]).stdout).toBe("changed=false\n");
    expect(fs.readFileSync(`${root}/etc/passwd`, "utf8").match(/^sglang:/gm)).toHaveLength(1);
    expect(fs.existsSync(`${root}/var/lib/sglang`)).toBe(true);
  });

  it("service-user.sh refuses a user name with spaces or metacharacters; nothing runs", () => {
    expect(run("service-user.sh", ["sg lang", "/var/lib/sglang"]).code).toBe(2);
    expect(run("service-user.sh", [`x;touch ${marker}`, "/var/lib/x"]).code).toBe(2);
    expect(run("service-user.sh", ["sglang", `/var/lib/$(touch ${marker})`]).code).toBe(2);
    expect(fs.existsSync(marker)).toBe(false);
    expect(fs.existsSync(`${root}/etc/passwd`)).toBe(false);
  });

  const e = envOf();
  const venvArgs = (toolkit = "13.0", reqs = requirements(e)) => [
    e.venvPath,
    e.python,
    toolkit,
    pinsLock(e),
    "--",
    ...reqs,
  ];

  it("python-env.sh records the lock on a simulated host and downloads nothing; a second run is a no-op", () => {
    const first = run("python-env.sh", venvArgs());
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toContain("changed=true");
    expect(first.stdout).toContain("platform=simulated");
    expect(first.stdout).toContain("torch_cuda=13.0");
    const lock = fs.readFileSync(`${root}${e.venvPath}/gpuhost-env.lock`, "utf8");
    expect(lock).toContain(`lock=${pinsLock(e)}`);
    expect(lock).toContain("requirement=torch==2.14.1+cu130");
    expect(run("python-env.sh", venvArgs()).stdout).toContain("changed=false");
    expect(installs()).toBe("");
  });

  it("python-env.sh refuses a torch build for another CUDA, before anything", () => {
    const r = run("python-env.sh", venvArgs("13.0", ["torch==2.14.1+cu128", "sglang==0.5.23"]));
    expect(r.code).toBe(3);
    expect(r.stderr).toContain("torch 2.14.1+cu128 is built for CUDA 12.8 but the toolkit is 13.0");
    expect(fs.existsSync(`${root}${e.venvPath}`)).toBe(false);
  });

  it("python-env.sh refuses a hostile venv path or lock; nothing runs", () => {
    expect(
      run("python-env.sh", [
        `/opt/v;touch ${marker}`,
        "/usr/bin/python3",
        "13.0",
        pinsLock(e),
        "--",
        "torch==2.14.1+cu130",
      ]).code,
    ).toBe(2);
    expect(
      run("python-env.sh", ["/opt/v", "/usr/bin/python3", "13.0", `$(touch ${marker})`, "--", "torch==2.14.1+cu130"])
        .code,
    ).toBe(2);
    expect(fs.existsSync(marker)).toBe(false);
    expect(installs()).toBe("");
  });

  it("jit-cache.sh creates the keyed workspace and reports it; prewarm reports itself skipped", () => {
    const r = run("jit-cache.sh", ["/var/cache/gpuhost/flashinfer", "cuda13.0-0123456789abcdef", "sglang"]);
    expect(r.stdout).toBe("workspace=/var/cache/gpuhost/flashinfer/cuda13.0-0123456789abcdef\n");
    expect(fs.statSync(`${root}/var/cache/gpuhost/flashinfer/cuda13.0-0123456789abcdef`).isDirectory()).toBe(true);
    expect(run("jit-cache.sh", ["/var/cache/x", `k;touch ${marker}`, "sglang"]).code).toBe(2);
    expect(fs.existsSync(marker)).toBe(false);
    expect(run("prewarm.sh", ["/opt/gpuhost/venv", "/var/cache/x", "sglang", "/usr/local/cuda-13.0"]).stdout).toContain(
      "prewarm=skipped",
    );
  });
});

describe("python-env.sh on this machine's real Python (as root, as on a host)", () => {
  const asRoot = process.getuid?.() === 0;
  it.skipIf(!asRoot && process.env.GPUHOST_SKIP_TESTHOST === "1")(
    "a venv whose pip an interrupted run broke is made anew, not failed on at every later run",
    async () => {
      expect(asRoot, "python-env.sh's real path runs as root (GPUHOST_SKIP_TESTHOST=1 skips it knowingly)").toBe(true);
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-venv-"));
      try {
        const venv = path.join(dir, "venv");
        // Each child asynchronously (test/support/run.ts): making a venv and recreating it took 40 s of
        // a loaded machine, which spawnSync spent with the worker's event loop stopped.
        const python = (await runChild("sh", ["-c", "command -v python3"])).stdout.trim();
        expect((await runChild(python, ["-m", "venv", venv], { timeout: 120_000 })).status).toBe(0);
        // What a killed `python -m venv` (its ensurepip) or pip upgrading itself can leave: a pip that cannot start.
        const [site] = fs.readdirSync(path.join(venv, "lib")).map((v) => path.join(venv, "lib", v, "site-packages"));
        fs.rmSync(path.join(site, "pip", "__main__.py"));
        const pipStarts = async () =>
          (await runChild(path.join(venv, "bin", "python3"), ["-m", "pip", "--version"], { timeout: 60_000 }))
            .status === 0;
        expect(await pipStarts()).toBe(false);
        const r = await runChild(
          "bash",
          [
            path.join(SCRIPTS, "python-env.sh"),
            venv,
            python,
            "13.0",
            `sha256:${"0".repeat(64)}`,
            // An index with nothing in it: the install after the venv is remade fails here, offline.
            "--index-url",
            `file://${dir}/empty-index`,
            "--",
            "torch==2.14.1+cu130",
          ],
          { env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }, timeout: 120_000 },
        );
        expect(r.stderr).toContain(`the venv's pip does not start (an interrupted install?): recreating ${venv}`);
        expect(await pipStarts()).toBe(true);
        // Nothing was installed (the index is empty), so no lock is recorded: the next run tries again.
        expect(r.status).not.toBe(0);
        expect(fs.existsSync(path.join(venv, "gpuhost-env.lock"))).toBe(false);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },
    180_000,
  );
});
