/**
 * A `testhost` stack of the real gpuhost program, pointed at a booted test host: a throwaway Pulumi
 * project folder (its Pulumi.yaml runs the compiled program, dist/index.js), a local state backend
 * inside it, and a stack config naming the host's SSH port and key, the stand-in apt repository
 * and the stand-in Python index. Nothing is written to the repository's stacks/.
 */
import { promises as fs } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { EngineOptions, EngineResult, ensureStack, PROJECT_ROOT, runPulumi } from "../../engine/pulumi";
import { testEngineOptions } from "../support/engine";
import { AptRepo, serveAptRepo } from "./apt-repo";
import { freeLocalPort } from "../../ports";
import { bootTestHost, TestHost, TestHostOptions } from "./harness";
import { PythonIndex, servePythonIndex } from "./python-index";
import { simulatorBinds, writeStandinSglangConfig } from "./simulator-install";

export const STACK = "testhost";
/**
 * Where the stand-in package sources sit on the host: gpuhost takes them over https or file:// only
 * (never http://), so the fixture mounts them into the container instead of serving them on loopback.
 */
export const APT_FILE_URL = "file:///srv/gpuhost-apt/";
export const PYPI_FILE_URL = "file:///srv/gpuhost-pypi/simple/";

export interface TestHostStack {
  dir: string;
  opts: EngineOptions;
  /** Runs pulumi on the stack; never throws on a non-zero exit (tests assert on it). */
  pulumi(...args: string[]): Promise<EngineResult>;
  /** Runs pulumi and throws with the output when it fails. */
  pulumiOk(...args: string[]): Promise<EngineResult>;
  /** `pulumi refresh --preview-only --expect-no-changes --diff`. */
  refreshPreview(): Promise<EngineResult>;
  /** Sets `gpuhost:<key>` values; objects merge deeply into the current ones. */
  setConfig(values: Record<string, unknown>): Promise<void>;
  outputs(): Promise<Record<string, unknown>>;
  remove(): Promise<void>;
}

/** The config that points the real program at the test host and its stand-in package sources. */
export function testHostConfig(p: {
  host: TestHost;
  repo: AptRepo;
  index: PythonIndex;
  servicePort: number;
}): Record<string, unknown> {
  return {
    hosts: [
      {
        name: "testhost",
        // The host's key is pinned, as on a real stack (an unpinned host is refused).
        connection: { kind: "ssh", host: p.host.host, port: p.host.port, user: "root", hostKey: p.host.hostKey },
        gpus: { count: 0 },
      },
    ],
    toolkit: {
      release: "13.0",
      repository: {
        url: p.repo.url,
        trust: "keyring",
        keyringUrl: p.repo.keyringDebUrl,
        keyringSha256: p.repo.keyringSha256,
      },
    },
    // a file:// index on the host: pip needs no hash lock (nothing is downloaded from elsewhere)
    environment: { pipIndexUrl: PYPI_FILE_URL },
    services: {
      active: "autoregressive",
      modelPath: "sim/tiny-reasoner",
      servedModelName: "tiny",
      port: p.servicePort,
      eagle3: { draftModelPath: "sim/tiny-eagle3-draft", numSteps: 3, eagleTopk: 1, numDraftTokens: 4 },
    },
    // the stand-in loads in a fraction of a second: a short gate deadline keeps a failing run short
    verification: { deadlineSeconds: 120 },
    // a small benchmark: the test proves the path, the bench/ scripts measure
    benchmark: {
      singleRequestMaxTokens: [256],
      singleRequestPrompts: 1,
      concurrency: [2, 4],
      sweepMaxTokens: 256,
      requestsPerConcurrency: 1,
      deadlineSeconds: 300,
      requestTimeoutSeconds: 120,
    },
  };
}

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === "object" && x !== null && !Array.isArray(x);

/** Deep merge of config objects (arrays and scalars replace). */
export function mergeObjects(base: unknown, over: unknown): unknown {
  if (!isObject(base) || !isObject(over)) return over;
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) out[k] = mergeObjects(base[k], v);
  return out;
}

/** Everything a `testhost` stack needs, started together and stopped together. */
export interface TestHostFixture {
  host: TestHost;
  repo: AptRepo;
  index: PythonIndex;
  servicePort: number;
  stack: TestHostStack;
  stop(): Promise<void>;
}

/** Where the fixture's stack folder goes, and what of this machine the test host mounts. */
export interface FixtureOptions {
  /** The folder the stack's throwaway project folder is made in; default the system's temporary one. */
  stackParent?: string;
  /** Folders mounted into the test host, given the stack's folder (made before the host boots). */
  binds?: (stackDir: string) => NonNullable<TestHostOptions["binds"]>;
  /** More secret `gpuhost:` values, set in the same engine command as the SSH key. */
  secrets?: Record<string, string>;
}

/**
 * Serves the stand-in apt repository and Python index, boots a test host with them and the compiled
 * simulator mounted (read-only) and the stand-in sglang config on it, and creates the stack. `extra`
 * is merged into the config.
 */
export async function startTestHostFixture(
  name: string,
  extra: Record<string, unknown> = {},
  options: FixtureOptions = {},
): Promise<TestHostFixture> {
  const cleanups: Array<() => Promise<void>> = [];
  const stop = async () => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
  };
  try {
    const repo = await serveAptRepo({ fileUrl: APT_FILE_URL });
    cleanups.push(() => repo.close());
    const index = await servePythonIndex();
    cleanups.push(() => index.close());
    const stackDir = await fs.mkdtemp(path.join(options.stackParent ?? os.tmpdir(), "gpuhost-testhost-stack-"));
    cleanups.push(() => fs.rm(stackDir, { recursive: true, force: true }));
    // The package sources and the compiled simulator are mounted read-only, not copied: the
    // repository alone is 691 MB of .debs, which every host used to copy before its first up.
    const sources = [
      { path: new URL(APT_FILE_URL).pathname, from: repo.dir },
      { path: new URL("..", PYPI_FILE_URL).pathname, from: index.dir },
    ];
    // readable as the copies were (0755), so apt's sandboxed _apt user may read the repository
    for (const s of sources) await fs.chmod(s.from, 0o755);
    const binds = [...sources, ...simulatorBinds(), ...(options.binds?.(stackDir) ?? [])];
    const host = await bootTestHost({ name, binds });
    cleanups.push(() => host.stop());
    await writeStandinSglangConfig(host.rootDir, { profiles: { default: "tiny" }, timeScale: 1, faults: [] });
    const servicePort = await freeLocalPort();
    const config = testHostConfig({ host, repo, index, servicePort });
    for (const [k, v] of Object.entries(extra)) config[k] = mergeObjects(config[k], v);
    const stack = await createTestHostStack(config, host.privateKey, stackDir, options.secrets);
    return { host, repo, index, servicePort, stack, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

export async function createTestHostStack(
  config: Record<string, unknown>,
  privateKey: string,
  dir?: string,
  secrets: Record<string, string> = {},
): Promise<TestHostStack> {
  dir ??= await fs.mkdtemp(path.join(os.tmpdir(), "gpuhost-testhost-stack-"));
  const program = path.join(PROJECT_ROOT, "dist", "index.js");
  await fs.access(program).catch(() => {
    throw new Error(`${program} is missing: compile the project first (npx tsc -p .)`);
  });
  // the repository's own project file (its options, e.g. refresh: always), running this checkout by
  // absolute path (its package.json names the compiled program), with the stack config kept here
  // instead of in stacks/
  const project = parseYaml(await fs.readFile(path.join(PROJECT_ROOT, "Pulumi.yaml"), "utf8")) as Record<
    string,
    unknown
  >;
  delete project.stackConfigDir;
  project.main = PROJECT_ROOT;
  await fs.writeFile(path.join(dir, "Pulumi.yaml"), stringifyYaml(project));
  const opts = testEngineOptions(dir, 15 * 60_000);
  const stackFile = path.join(dir, `Pulumi.${STACK}.yaml`);
  const pulumi = (...args: string[]) => runPulumi([...args, "--stack", STACK], opts);
  const pulumiOk = async (...args: string[]) => {
    const r = await pulumi(...args);
    if (r.code !== 0) throw new Error(`pulumi ${args.join(" ")} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
    return r;
  };
  const setConfig = async (values: Record<string, unknown>) => {
    const doc = (parseYaml(await fs.readFile(stackFile, "utf8").catch(() => "")) ?? {}) as {
      config?: Record<string, unknown>;
    };
    doc.config ??= {};
    for (const [k, v] of Object.entries(values)) {
      const key = `gpuhost:${k}`;
      doc.config[key] = mergeObjects(doc.config[key], v);
    }
    await fs.writeFile(stackFile, stringifyYaml(doc));
  };

  await ensureStack(STACK, opts);
  await setConfig(config);
  // set-all's key=value form: a value starting with "-----BEGIN" would read as a flag to `config set`
  const values = Object.entries({ ...secrets, sshPrivateKey: privateKey }).flatMap(([k, v]) => [
    "--secret",
    `gpuhost:${k}=${v}`,
  ]);
  await pulumiOk("config", "set-all", ...values);
  return {
    dir,
    opts,
    pulumi,
    pulumiOk,
    setConfig,
    refreshPreview: () => pulumi("refresh", "--preview-only", "--expect-no-changes", "--diff"),
    outputs: async () => JSON.parse((await pulumiOk("stack", "output", "--json")).stdout) as Record<string, unknown>,
    remove: () => fs.rm(dir, { recursive: true, force: true }),
  };
}
