/**
 * pulumi-language-nodejs, written in TypeScript.
 *
 * Why this exists: the upstream Go language host (module
 * github.com/pulumi/pulumi/sdk/nodejs/cmd/pulumi-language-nodejs/v3) is not served by the Go module
 * proxy these machines reach (every pseudo-version of a release commit is refused, see
 * engine/README.md), so the engine could not run a Node.js program at all. This is a real
 * implementation of the LanguageRuntime gRPC service, not a mock: the engine starts it like any
 * language plugin, and Run starts the same `@pulumi/pulumi/cmd/run` entry the Go host starts, with
 * the same flags and environment, against the engine's real resource monitor.
 *
 * Protocol facts mirrored from the Go host: the plugin prints its port on stdout and logs on
 * stderr; the engine address is the last positional argument; config reaches the program as
 * PULUMI_CONFIG (JSON) and PULUMI_CONFIG_SECRET_KEYS; exit code 32 means "the program already
 * reported its error" (RunResponse.bail).
 */
import * as grpc from "@grpc/grpc-js";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { watchEngine } from "../../../gate/transport/process-guard";

// The generated stubs and their declarations ship with @pulumi/pulumi (proto/*_pb.js and .d.ts).
import * as langrpc from "@pulumi/pulumi/proto/language_grpc_pb";
import * as langproto from "@pulumi/pulumi/proto/language_pb";
import * as pluginproto from "@pulumi/pulumi/proto/plugin_pb";

/** Exit code @pulumi/pulumi's runner uses after it has already shown the user an actionable error. */
const BAIL_EXIT_CODE = 32;
const SDK_VERSION = (
  JSON.parse(fs.readFileSync(require.resolve("@pulumi/pulumi/package.json"), "utf8")) as { version: string }
).version;

type Callback<T> = (err: grpc.ServiceError | null, value?: T) => void;
interface Call<T> {
  request: T;
}

/** A resource plugin a program needs, read from node_modules/<pkg>/package.json `pulumi` blocks. */
export interface PluginRef {
  name: string;
  version: string;
  server?: string;
}

/** Finds plugin-bearing packages (package.json with `pulumi.resource: true`) under node_modules. */
export function requiredPlugins(programDir: string): PluginRef[] {
  const found = new Map<string, PluginRef>();
  const modules = findNodeModules(programDir);
  if (!modules) return [];
  const visit = (pkgDir: string) => {
    const manifest = path.join(pkgDir, "package.json");
    if (!fs.existsSync(manifest)) return;
    let pkg: {
      name?: string;
      version?: string;
      pulumi?: { resource?: boolean; name?: string; version?: string; server?: string };
    };
    try {
      pkg = JSON.parse(fs.readFileSync(manifest, "utf8")) as typeof pkg;
    } catch {
      return;
    }
    if (!pkg.pulumi?.resource || !pkg.name) return;
    const name = pkg.pulumi.name ?? pkg.name.replace(/^@pulumi\//, "").replace(/^@/, "");
    const version = pkg.pulumi.version ?? pkg.version ?? "";
    found.set(name, { name, version: version.startsWith("v") ? version : `v${version}`, server: pkg.pulumi.server });
  };
  for (const entry of fs.readdirSync(modules)) {
    if (entry.startsWith(".")) continue;
    const full = path.join(modules, entry);
    if (entry.startsWith("@")) {
      for (const scoped of fs.readdirSync(full)) visit(path.join(full, scoped));
    } else {
      visit(full);
    }
  }
  return [...found.values()].sort((a, b) => a.name.localeCompare(b.name));
}

function findNodeModules(start: string): string | undefined {
  let dir = path.resolve(start);
  for (;;) {
    const candidate = path.join(dir, "node_modules");
    if (fs.existsSync(candidate)) return candidate;
    const parent = path.dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

/**
 * @pulumi/pulumi's `cmd/run` from the program's own node_modules, as the Go host finds it: a program
 * that depends on gpuhost (examples/) has its own copy of @pulumi/pulumi, and its resources must be
 * registered through that copy. This host's copy only where the program has none.
 */
export function runEntry(programDir: string): string {
  let manifest: string;
  try {
    manifest = require.resolve("@pulumi/pulumi/package.json", { paths: [programDir] });
  } catch {
    manifest = require.resolve("@pulumi/pulumi/package.json");
  }
  return path.join(path.dirname(manifest), "cmd", "run");
}

/** The argv for `node <run> ...`, built exactly as the Go host builds it. */
export function runArguments(
  runPath: string,
  req: {
    monitor: string;
    engine: string;
    organization: string;
    project: string;
    stack: string;
    pwd: string;
    rootDirectory: string;
    dryRun: boolean;
    parallel: number;
    program: string;
    args: string[];
  },
): string[] {
  const args = [runPath];
  const add = (k: string, v: string) => {
    if (v) args.push(`--${k}`, v);
  };
  add("monitor", req.monitor);
  add("engine", req.engine);
  add("organization", req.organization);
  add("project", req.project);
  add("root-directory", req.rootDirectory);
  add("stack", req.stack);
  add("pwd", req.pwd);
  if (req.dryRun) args.push("--dry-run");
  add("parallel", String(req.parallel));
  args.push(req.program || ".");
  args.push(...req.args);
  return args;
}

class LanguageHost {
  /** The programs Run started and that have not exited: stopped when the engine is gone. */
  readonly programs = new Set<ReturnType<typeof spawn>>();

  constructor(private readonly engineAddress: string) {}

  handshake(_call: Call<unknown>, cb: Callback<unknown>) {
    cb(null, new langproto.LanguageHandshakeResponse());
  }

  getPluginInfo(_call: Call<unknown>, cb: Callback<unknown>) {
    const info = new pluginproto.PluginInfo();
    info.setVersion(SDK_VERSION);
    cb(null, info);
  }

  getRequiredPlugins(call: Call<langproto.GetRequiredPluginsRequest>, cb: Callback<unknown>) {
    const dir = call.request.getInfo()?.getProgramDirectory() || call.request.getPwd() || process.cwd();
    const resp = new langproto.GetRequiredPluginsResponse();
    resp.setPluginsList(dependencies(dir, pluginproto.PluginDependency));
    cb(null, resp);
  }

  getRequiredPackages(call: Call<langproto.GetRequiredPackagesRequest>, cb: Callback<unknown>) {
    const dir = call.request.getInfo()?.getProgramDirectory() || process.cwd();
    const resp = new langproto.GetRequiredPackagesResponse();
    resp.setPackagesList(dependencies(dir, pluginproto.PackageDependency));
    cb(null, resp);
  }

  run(call: Call<langproto.RunRequest>, cb: Callback<unknown>) {
    const req = call.request;
    const info = req.getInfo();
    const programDir = info?.getProgramDirectory() || req.getPwd() || process.cwd();
    const entry = info?.getEntryPoint() || req.getProgram() || ".";
    const runPath = runEntry(programDir);
    const argv = runArguments(runPath, {
      monitor: req.getMonitorAddress(),
      engine: this.engineAddress,
      organization: req.getOrganization(),
      project: req.getProject(),
      stack: req.getStack(),
      pwd: req.getPwd(),
      rootDirectory: info?.getRootDirectory() ?? "",
      dryRun: req.getDryrun(),
      parallel: req.getParallel(),
      program: entry === "." ? programDir : path.resolve(programDir, entry),
      args: req.getArgsList(),
    });
    const config: Record<string, string> = {};
    req.getConfigMap().forEach((v: string, k: string) => {
      config[k] = v;
    });
    const options: Record<string, unknown> = info?.getOptions()?.toJavaScript() ?? {};
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PULUMI_CONFIG: JSON.stringify(config),
      PULUMI_CONFIG_SECRET_KEYS: JSON.stringify(req.getConfigsecretkeysList()),
      PULUMI_NODEJS_TYPESCRIPT: String(options.typescript === true),
    };
    if (typeof options.tsconfig === "string") env.PULUMI_NODEJS_TSCONFIG_PATH = options.tsconfig;
    const child = spawn(process.execPath, [...nodeOptions(options), ...argv], {
      cwd: req.getPwd() || programDir,
      env,
      stdio: ["ignore", "inherit", "inherit"],
    });
    this.programs.add(child);
    const resp = new langproto.RunResponse();
    child.on("error", (err) => {
      resp.setError(`Problem executing program (could not run language executor): ${err.message}`);
      cb(null, resp);
    });
    child.on("exit", (code, signal) => {
      this.programs.delete(child);
      if (code === 0) {
        // success
      } else if (code === BAIL_EXIT_CODE) {
        resp.setBail(true);
      } else if (signal) {
        resp.setError(`Program exited unexpectedly: signal ${signal}`);
      } else {
        resp.setError(`Program exited with non-zero exit code: ${code}`);
      }
      cb(null, resp);
    });
  }

  installDependencies(call: grpc.ServerWritableStream<unknown, unknown>) {
    // Dependencies are installed by `npm ci` in engine/setup.sh, never by the engine.
    const resp = new langproto.InstallDependenciesResponse();
    resp.setStdout(Buffer.from("dependencies are managed by npm (engine/setup.sh)\n"));
    call.write(resp);
    call.end();
  }

  about(_call: Call<unknown>, cb: Callback<unknown>) {
    const resp = new langproto.AboutResponse();
    resp.setExecutable(process.execPath);
    resp.setVersion(process.version);
    cb(null, resp);
  }

  getProgramDependencies(call: Call<langproto.GetProgramDependenciesRequest>, cb: Callback<unknown>) {
    const dir = call.request.getInfo()?.getProgramDirectory() || process.cwd();
    const resp = new langproto.GetProgramDependenciesResponse();
    const pkgPath = path.join(dir, "package.json");
    const deps: Record<string, string> = fs.existsSync(pkgPath)
      ? ((JSON.parse(fs.readFileSync(pkgPath, "utf8")) as { dependencies?: Record<string, string> }).dependencies ?? {})
      : {};
    resp.setDependenciesList(
      Object.entries(deps).map(([name, version]) => {
        const d = new langproto.DependencyInfo();
        d.setName(name);
        d.setVersion(version);
        return d;
      }),
    );
    cb(null, resp);
  }

  runtimeOptionsPrompts(_call: Call<unknown>, cb: Callback<unknown>) {
    cb(null, new langproto.RuntimeOptionsResponse());
  }
}

/** The fields PluginDependency and PackageDependency share. */
interface DependencyMessage {
  setName(v: string): unknown;
  setKind(v: string): unknown;
  setVersion(v: string): unknown;
  setServer(v: string): unknown;
}

/** The plugins a program needs, as PluginDependency or PackageDependency messages (same fields). */
function dependencies<M extends DependencyMessage>(dir: string, Message: new () => M): M[] {
  return requiredPlugins(dir).map((p) => {
    const dep = new Message();
    dep.setName(p.name);
    dep.setKind("resource");
    dep.setVersion(p.version);
    if (p.server) dep.setServer(p.server);
    return dep;
  });
}

function nodeOptions(options: Record<string, unknown>): string[] {
  const extra = options.nodeargs;
  return typeof extra === "string" && extra.trim() ? extra.trim().split(/\s+/) : [];
}

function unimplemented(name: string) {
  return (_call: unknown, cb: Callback<unknown>) =>
    cb({
      code: grpc.status.UNIMPLEMENTED,
      details: `${name} is not implemented by gpuhost's language host`,
      name,
      message: name,
      metadata: new grpc.Metadata(),
    });
}

export async function main(argv: string[]): Promise<void> {
  const positional = argv.filter((a) => !a.startsWith("-"));
  const engineAddress = positional[positional.length - 1] ?? "";
  const host = new LanguageHost(engineAddress);
  const service = langrpc.LanguageRuntimeService as unknown as grpc.ServiceDefinition;
  const impl: grpc.UntypedServiceImplementation = {};
  for (const method of Object.keys(service)) {
    const own = (host as unknown as Record<string, unknown>)[method];
    impl[method] =
      typeof own === "function"
        ? ((own as (...a: unknown[]) => unknown).bind(host) as never)
        : (unimplemented(method) as never);
  }
  const server = new grpc.Server({ "grpc.max_receive_message_length": 400 * 1024 * 1024 });
  server.addService(service, impl);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  process.stdout.write(`${port}\n`);
  // After `kill -9` of pulumi nothing stops a plugin: it and the program it runs would wait forever
  // (upstream's Go host notices within its 5-minute health check). Leave within about 2 s instead.
  watchEngine({ argv: ["", "", engineAddress] }, (why) => {
    process.stderr.write(`pulumi-language-nodejs: ${why}; stopping\n`);
    for (const child of host.programs) child.kill("SIGTERM");
    server.forceShutdown();
    setTimeout(() => process.exit(1), 500).unref();
  });
}

if (require.main === module) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(
      `pulumi-language-nodejs: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  });
}
