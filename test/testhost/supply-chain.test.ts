/**
 * Supply-chain checks of the host scripts (issue #12) on a real Debian host, with real curl, dpkg,
 * apt and pip, over real https: the test process serves the stand-in sources over TLS on loopback
 * with a throwaway CA (tls.ts) that the host trusts through its system store (update-ca-certificates),
 * as a host trusts a vendor's chain. Each script runs over SSH through execOnHost with the host key
 * pinned, with its arguments built by the components' own functions.
 *
 * components/cuda-toolkit/scripts/repository.sh (the cuda-keyring .deb, arguments from toolkitPlan):
 *   - a keyring .deb whose sha256 is not the pinned one (an impostor cuda-keyring served at the
 *     keyring URL, over https and as file:// on the host) is refused with exit 3 naming both hashes
 *     and toolkit.repository.keyringSha256; dpkg -i never ran: no cuda-keyring, no sources list, no
 *     file of the impostor;
 *   - an https:// keyring without a pinned sha256 is refused with exit 3, printing the sha256 it got;
 *   - control: the same https keyring with its sha256 pinned installs, and apt verifies the signed
 *     repository over https with it.
 *
 * components/serving-env/scripts/python-env.sh --require-hashes (the hash-lock branch):
 *   How "remote" is decided: not by the script. ServingEnvironment requires environment.requirementsLock
 *   when an index is remote (lock.ts hasRemoteIndex: pip's default or any non-file:// URL) and then
 *   passes `--require-hashes` with the lock on standard input; the script takes that branch whenever
 *   the flag is given. Here the index IS remote in that sense: an https:// PEP 503 index served by the
 *   test process (hasRemoteIndex is asserted true for it), arguments from lock.ts as the component
 *   renders them.
 *   - every package with its right --hash: installs, torch reports CUDA 13.0, the lock is recorded;
 *   - the index serving a torch wheel that differs from the one the lock was made from (its page's
 *     own #sha256 updated to match, as a compromised index would): pip refuses, the script fails,
 *     nothing is recorded and torch is not installed;
 *   - a lock line without a hash: pip refuses (as lock.ts's checkHashLock does before, in the program).
 */
import { createHash } from "node:crypto";
import { promises as fs } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cudaToolkitOptionsSchema } from "../../components/cuda-toolkit/options";
import { toolkitPlan } from "../../components/cuda-toolkit/plan";
import type { SshConnection } from "../../components/host/connection";
import { execOnHost } from "../../components/host/exec";
import { checkHashLock, hasRemoteIndex, indexArgs, pinsLock, requirements } from "../../components/serving-env/lock";
import { EnvironmentSchema } from "../../components/serving-env/schema";
import { projectRoot } from "../../project-files";
import { type AptRepo, CUDA_SOURCES_LIST, serveAptRepo } from "./apt-repo";
import { bootTestHost, connectionOf, requireTestHost, type TestHost } from "./harness";
import { run } from "./proc";
import { type PythonIndex, servePythonIndex } from "./python-index";
import { serveDirectory, type StaticServer } from "./static-server";
import { installTestCa, makeTestTls, type TestTls } from "./tls";

const enabled = requireTestHost();
const STEP = 300_000;
const APT = "DEBIAN_FRONTEND=noninteractive apt-get -y -q";
const KEYRING_DEB = "cuda-keyring_1.1-1_all.deb";
/** What only the impostor keyring package would put on the host. */
const IMPOSTOR_FILE = "/etc/gpuhost-impostor-keyring";

const sha256 = async (file: string) =>
  createHash("sha256")
    .update(await fs.readFile(file))
    .digest("hex");

/** A cuda-keyring package that is not the repository's (same name and version, other content). */
async function buildImpostorKeyring(dir: string): Promise<string> {
  const root = path.join(dir, "impostor-root");
  await fs.mkdir(path.join(root, "DEBIAN"), { recursive: true });
  await fs.writeFile(
    path.join(root, "DEBIAN/control"),
    "Package: cuda-keyring\nVersion: 1.1-1\nArchitecture: all\nMaintainer: impostor <impostor@localhost>\nDescription: not the repository's keyring (gpuhost test)\n",
  );
  await fs.mkdir(path.join(root, path.dirname(IMPOSTOR_FILE)), { recursive: true });
  await fs.writeFile(path.join(root, IMPOSTOR_FILE), "installed by the impostor keyring\n");
  const out = path.join(dir, "serve");
  await fs.mkdir(out);
  await run("dpkg-deb", ["--root-owner-group", "--build", root, path.join(out, KEYRING_DEB)]);
  return path.join(out, KEYRING_DEB);
}

describe.runIf(enabled)("supply chain on a real Debian host: keyring sha256 and pip --require-hashes", () => {
  let host: TestHost;
  let tls: TestTls;
  let repo: AptRepo;
  let index: PythonIndex;
  let work: string;
  let httpsRepo: StaticServer;
  let httpsImpostor: StaticServer;
  let httpsIndex: StaticServer;
  let httpsTampered: StaticServer;
  let impostorSha: string;
  let conn: SshConnection;
  /** The torch wheel's file name, its sha256, and the tampered copy's. */
  const torch = { file: "", sha: "", tamperedSha: "" };

  beforeAll(async () => {
    work = await fs.mkdtemp(path.join(os.tmpdir(), "gpuhost-supply-"));
    tls = await makeTestTls();
    repo = await serveAptRepo();
    index = await servePythonIndex();
    httpsRepo = await serveDirectory(repo.dir, 0, tls);
    const impostor = await buildImpostorKeyring(work);
    impostorSha = await sha256(impostor);
    httpsImpostor = await serveDirectory(path.dirname(impostor), 0, tls);
    httpsIndex = await serveDirectory(index.dir, 0, tls);

    // A copy of the index whose torch wheel differs from the original (bytes appended), with its
    // simple page's #sha256 updated to the new file: internally consistent, as a compromised index is.
    const tampered = path.join(work, "tampered-index");
    await run("cp", ["-a", index.dir, tampered]);
    torch.file = (await fs.readdir(path.join(index.dir, "files"))).find((f) => f.startsWith("torch-")) ?? "";
    torch.sha = await sha256(path.join(index.dir, "files", torch.file));
    await fs.appendFile(path.join(tampered, "files", torch.file), Buffer.from("not the wheel the lock was made from"));
    torch.tamperedSha = await sha256(path.join(tampered, "files", torch.file));
    const page = path.join(tampered, "simple/torch/index.html");
    await fs.writeFile(page, (await fs.readFile(page, "utf8")).replace(torch.sha, torch.tamperedSha));
    httpsTampered = await serveDirectory(tampered, 0, tls);

    host = await bootTestHost({ name: "supply" });
    await installTestCa(host, tls);
    // The impostor also on the host's disk, for the file:// keyring case.
    await fs.mkdir(path.join(host.rootDir, "srv/impostor"), { recursive: true });
    await fs.copyFile(impostor, path.join(host.rootDir, "srv/impostor", KEYRING_DEB));
    conn = connectionOf(host);
  }, 30 * 60_000);

  afterAll(async () => {
    await host?.stop();
    for (const s of [httpsRepo, httpsImpostor, httpsIndex, httpsTampered]) await s?.close();
    await repo?.close();
    await index?.close();
    await tls?.remove();
    if (work) await fs.rm(work, { recursive: true, force: true });
  }, 120_000);

  describe("repository.sh: the cuda-keyring .deb against toolkit.repository.keyringSha256", () => {
    /** repository.sh as CudaToolkit runs it (toolkitPlan), for these repository options. */
    const repository = async (options: { keyringUrl: string; keyringSha256?: string }) => {
      const plan = toolkitPlan(cudaToolkitOptionsSchema.parse({ repository: { url: httpsRepo.url, ...options } }));
      const script = await fs.readFile(path.join(projectRoot(), plan.repository.script), "utf8");
      return execOnHost(conn, script, plan.repository.args, { scriptName: "repository.sh", timeoutMs: STEP });
    };
    /** Nothing of any keyring package reached the host: dpkg -i never ran. */
    const nothingInstalled = async () => {
      expect((await host.exec("dpkg-query -W -f='${Status}' cuda-keyring")).stdout).not.toContain("installed");
      expect((await host.exec(`test -e ${CUDA_SOURCES_LIST}`)).code).not.toBe(0);
      expect((await host.exec(`test -e ${repo.keyringPath}`)).code).not.toBe(0);
      expect((await host.exec(`test -e ${IMPOSTOR_FILE}`)).code).not.toBe(0);
      expect((await host.exec("ls /etc/apt/sources.list.d/")).stdout.trim()).toBe("");
    };

    it(
      "a keyring whose sha256 is not the pinned one is refused (exit 3, both hashes named), over https and file://",
      async () => {
        expect(impostorSha).not.toBe(repo.keyringSha256);
        for (const keyringUrl of [`${httpsImpostor.url}${KEYRING_DEB}`, `file:///srv/impostor/${KEYRING_DEB}`]) {
          const r = await repository({ keyringUrl, keyringSha256: repo.keyringSha256 });
          expect(r.code, r.stderr).toBe(3);
          expect(r.stderr).toContain(
            `repository.sh: the cuda-keyring .deb from ${keyringUrl} has sha256 ${impostorSha}, but toolkit.repository.keyringSha256 pins ${repo.keyringSha256}: not installed`,
          );
          expect(r.stdout).not.toContain("changed=");
          await nothingInstalled();
        }
        expect(httpsImpostor.requests).toContain(`/${KEYRING_DEB}`); // it was fetched, over https
      },
      STEP,
    );

    it(
      "an https:// keyring without a pinned sha256 is refused (exit 3), printing the sha256 it downloaded",
      async () => {
        const keyringUrl = `${httpsRepo.url}${KEYRING_DEB}`;
        expect(repo.keyringDebUrl.endsWith(`/${KEYRING_DEB}`)).toBe(true);
        const before = httpsRepo.requests.length;
        const r = await repository({ keyringUrl });
        expect(r.code, r.stderr).toBe(3);
        expect(r.stderr).toContain(
          `refusing to install the cuda-keyring .deb from ${keyringUrl} without a pinned sha256. It downloaded with sha256 ${repo.keyringSha256}`,
        );
        expect(r.stderr).toContain(`toolkit.repository.keyringSha256 = ${repo.keyringSha256}`);
        expect(httpsRepo.requests.slice(before)).toEqual([`/${KEYRING_DEB}`]);
        await nothingInstalled();
      },
      STEP,
    );

    // Last in this group: it installs the keyring.
    it(
      "control: the same https keyring with its sha256 pinned installs, and apt verifies the repository with it",
      async () => {
        const r = await repository({ keyringUrl: `${httpsRepo.url}${KEYRING_DEB}`, keyringSha256: repo.keyringSha256 });
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout).toContain("changed=yes");
        expect((await host.execOk("dpkg-query -W -f='${Status}' cuda-keyring")).stdout).toBe("install ok installed");
        expect((await host.execOk(`cat ${CUDA_SOURCES_LIST}`)).stdout.trim()).toBe(
          `deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] ${httpsRepo.url} /`,
        );
        const update = await host.execOk(`${APT} update 2>&1`);
        expect(update.stdout).not.toMatch(/NO_PUBKEY|not signed|insecure|Certificate verification failed/i);
        expect(httpsRepo.requests).toContain("/InRelease");
        expect((await host.execOk("apt-cache policy cuda-toolkit-13-0")).stdout).toContain("Candidate: 13.0.2-1");
      },
      STEP,
    );
  });

  describe("python-env.sh --require-hashes: pip against a hash lock", () => {
    const environment = (venv: string, indexUrl: string) =>
      EnvironmentSchema.parse({ venvPath: venv, pipIndexUrl: indexUrl });
    /** The hash lock as `pip-compile --generate-hashes` would write it for the stand-in wheels. */
    const hashLock = async (omitHashOf?: string) => {
      const files = await fs.readdir(path.join(index.dir, "files"));
      const lines: string[] = [];
      for (const req of index.requirements) {
        const name = req.split("==")[0];
        const wheel = files.find((f) => f.startsWith(`${name.replace(/-/g, "_")}-`));
        if (!wheel) throw new Error(`no wheel for ${name} in ${files.join(", ")}`);
        const hash = ` --hash=sha256:${await sha256(path.join(index.dir, "files", wheel))}`;
        lines.push(`${req}${name === omitHashOf ? "" : hash}`);
      }
      return `${lines.join("\n")}\n`;
    };
    /** python-env.sh as ServingEnvironment runs it when a lock is configured. */
    const pythonEnv = async (venv: string, indexUrl: string, lock: string) => {
      const env = environment(venv, indexUrl);
      const script = await fs.readFile(
        path.join(projectRoot(), "components/serving-env/scripts/python-env.sh"),
        "utf8",
      );
      const args = [
        env.venvPath,
        env.python,
        "13.0",
        pinsLock(env, lock),
        ...indexArgs(env),
        "--require-hashes",
        "--",
        ...requirements(env),
      ];
      return execOnHost(conn, script, args, { scriptName: "python-env.sh", stdin: lock, timeoutMs: STEP });
    };
    const torchOf = (venv: string) => host.exec(`${venv}/bin/python3 -c 'import torch; print(torch.version.cuda)'`);

    it(
      "every package with its right --hash installs from the https index; torch reports 13.0; the lock is recorded",
      async () => {
        const venv = "/opt/gpuhost/venv-hashed";
        const indexUrl = `${httpsIndex.url}simple/`;
        const env = environment(venv, indexUrl);
        // The component's rule: this index is remote, so the lock is required (and checked) there first.
        expect(hasRemoteIndex(env)).toBe(true);
        const lock = await hashLock();
        expect(checkHashLock(lock, env, "gpuhost:environment.requirementsLock")).toBe(lock);
        const r = await pythonEnv(venv, indexUrl, lock);
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout).toContain("changed=true");
        expect(r.stdout).toContain(`lock=${pinsLock(env, lock)}`);
        expect(r.stdout).toContain("platform=real");
        expect(r.stdout).toContain("torch_cuda=13.0");
        expect((await torchOf(venv)).stdout.trim()).toBe("13.0");
        expect(httpsIndex.requests).toContain("/simple/torch/");
        expect(httpsIndex.requests).toContain(`/files/${torch.file}`);
      },
      STEP,
    );

    it(
      "a torch wheel that differs from the lock's is refused by pip: the script fails, nothing is recorded",
      async () => {
        const venv = "/opt/gpuhost/venv-tampered";
        const r = await pythonEnv(venv, `${httpsTampered.url}simple/`, await hashLock());
        expect(r.code).not.toBe(0);
        expect(r.stdout).not.toContain("changed=");
        const out = r.stdout + r.stderr;
        expect(out).toContain("THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE");
        expect(out).toMatch(new RegExp(`Expected sha256 ${torch.sha}\\s+Got\\s+${torch.tamperedSha}`));
        expect(httpsTampered.requests).toContain(`/files/${torch.file}`);
        expect((await host.exec(`test -e ${venv}/gpuhost-env.lock`)).code).not.toBe(0);
        expect((await torchOf(venv)).code).not.toBe(0);
      },
      STEP,
    );

    it(
      "a lock line without a hash is refused by pip (and before that by checkHashLock in the program)",
      async () => {
        const venv = "/opt/gpuhost/venv-unhashed";
        const indexUrl = `${httpsIndex.url}simple/`;
        const lock = await hashLock("ninja");
        expect(lock).toMatch(/^ninja==\S+\n/m);
        expect(() => checkHashLock(lock, environment(venv, indexUrl), "gpuhost:environment.requirementsLock")).toThrow(
          /ninja==\S+ has no --hash=sha256/,
        );
        const r = await pythonEnv(venv, indexUrl, lock);
        expect(r.code).not.toBe(0);
        expect(r.stdout).not.toContain("changed=");
        expect(r.stdout + r.stderr).toContain("Hashes are required in --require-hashes mode");
        expect((await host.exec(`test -e ${venv}/gpuhost-env.lock`)).code).not.toBe(0);
        expect((await torchOf(venv)).code).not.toBe(0);
      },
      STEP,
    );
  });
});
