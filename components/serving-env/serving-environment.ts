/**
 * ServingEnvironment: the service user, the Python venv with the pinned serving stack (torch built
 * for the installed toolkit), FlashInfer's JIT workspace keyed by the toolkit fingerprint, and an
 * optional JIT pre-warm. Outputs the environment lock the services and VerifiedGeneration key on.
 *
 * A connection with a root (a folder standing for /, the simulated platform's) runs the same
 * scripts; nothing is downloaded there (see scripts/python-env.sh and docs/configuration.md
 * "Simulated platform").
 */
import * as pulumi from "@pulumi/pulumi";
import * as fs from "node:fs";
import * as path from "node:path";
import { hostScript, installsUnderRoot, parseKeyValues, type HostConnectionInput } from "../host/script";
import { PlainError } from "../plain-error";
import {
  checkTorchMatchesToolkit,
  environmentLock,
  checkHashLock,
  checkLockCudaWheels,
  hasRemoteIndex,
  indexArgs,
  jitWorkspace,
  pinsLock,
  requirements,
  toolkitKey,
  venvWheelsRepair,
} from "./lock";
import type { DriftFragment } from "../drift/fragments";
import type { EnvironmentConfig } from "./schema";

const SCRIPTS = "components/serving-env/scripts";

export interface ServingEnvironmentArgs {
  /** Where the environment is built. */
  connection: HostConnectionInput;
  /** The environment knobs (config `environment`), already validated. */
  environment: EnvironmentConfig;
  /** The toolkit release the torch build must match ("13.0"). */
  toolkitVersion: string;
  /** CudaToolkit's fingerprint (toolkit and package versions): keys the JIT cache and the lock. */
  toolkitFingerprint: pulumi.Input<string>;
  /** CUDA_HOME of the toolkit (/usr/local/cuda-13.0), for the pre-warm. */
  cudaHome: string;
}

export class ServingEnvironment extends pulumi.ComponentResource {
  /** sha256 of the pinned set, the indexes and the toolkit fingerprint (lock.ts environmentLock). */
  public readonly environmentLock: pulumi.Output<string>;
  /** FLASHINFER_WORKSPACE_BASE for this toolkit. */
  public readonly jitWorkspace: pulumi.Output<string>;
  /** The user the services run as. */
  public readonly serviceUser: pulumi.Output<string>;
  /** The venv holding the pinned serving stack. */
  public readonly venvPath: pulumi.Output<string>;
  /** CUDA release of the torch in the venv, as the host reported it (under a root: from the pin). */
  public readonly torchCuda: pulumi.Output<string>;
  /** What python-env.sh reported: "real", or "simulated" where nothing was installed (under a root). */
  public readonly platform: pulumi.Output<string>;
  /** Its share of ToolkitState (components/drift): the JIT cache base and key in use, the venv whose CUDA wheels it checks and repairs. */
  public readonly drift: pulumi.Output<DriftFragment>;

  constructor(name: string, args: ServingEnvironmentArgs, opts?: pulumi.ComponentResourceOptions) {
    super("gpuhost:index:ServingEnvironment", name, {}, opts);
    const env = args.environment;
    const hashLock = configuredHashLock(args);

    const fingerprint = pulumi.output(args.toolkitFingerprint);
    const lock = fingerprint.apply((f) => environmentLock(env, f, hashLock));
    const workspace = fingerprint.apply((f) => jitWorkspace(env, args.toolkitVersion, f));

    const user = hostScript(
      `${name}-user`,
      { connection: args.connection, script: `${SCRIPTS}/service-user.sh`, args: [env.serviceUser, env.serviceHome] },
      { parent: this },
    );

    // The venv needs only the user, so pip downloads while the toolkit installs; the JIT workspace
    // waits for the toolkit's fingerprint (its key).
    const venv = venvCommand(name, args, hashLock, user, this);
    const jit = hostScript(
      `${name}-jit-cache`,
      {
        connection: args.connection,
        script: `${SCRIPTS}/jit-cache.sh`,
        args: [env.jitCacheBase, fingerprint.apply((f) => toolkitKey(args.toolkitVersion, f)), env.serviceUser],
      },
      { parent: this, dependsOn: [user] },
    );
    if (env.prewarm) prewarmCommand(name, args, workspace, lock, [venv, jit], this);

    const venvReport = venv.stdout.apply(parseKeyValues);
    const pins = pinsLock(env, hashLock);
    this.environmentLock = pulumi.all([lock, venvReport]).apply(([l, r]) => {
      if (r.lock !== undefined && r.lock !== pins)
        throw new Error(`the host recorded venv lock ${r.lock}, expected ${pins}`);
      return l;
    });
    this.jitWorkspace = pulumi.all([workspace, jit.stdout]).apply(([w, out]) => parseKeyValues(out).workspace ?? w);
    this.serviceUser = pulumi.output(env.serviceUser);
    this.venvPath = pulumi.output(env.venvPath);
    this.torchCuda = venvReport.apply((r) => r.torch_cuda ?? "unknown");
    this.platform = venvReport.apply((r) => r.platform ?? "unknown");
    this.drift = fingerprint.apply((f) => ({
      expected: { jitBase: env.jitCacheBase, jitKey: toolkitKey(args.toolkitVersion, f), venvPath: env.venvPath },
      repairs: venvWheelsRepair(env, hashLock),
    }));
    this.registerOutputs({
      environmentLock: this.environmentLock,
      jitWorkspace: this.jitWorkspace,
      serviceUser: this.serviceUser,
      venvPath: this.venvPath,
      torchCuda: this.torchCuda,
      platform: this.platform,
    });
  }
}

/** The hash lock the venv is installed from (config `environment.requirementsLock`), checked; none without one. */
function configuredHashLock(args: ServingEnvironmentArgs): string | undefined {
  const env = args.environment;
  return checkedConfig(() => {
    // Fails at preview, before any download, when the pin cannot match the toolkit.
    checkTorchMatchesToolkit(env.packages.torch, args.toolkitVersion);
    // Wheels from a remote index are installed only against a hash lock (pip --require-hashes).
    if (env.requirementsLock !== undefined) {
      const file = path.resolve(env.requirementsLock);
      if (!fs.existsSync(file)) throw new Error(`gpuhost:environment.requirementsLock: ${file} does not exist`);
      const text = checkHashLock(fs.readFileSync(file, "utf8"), env, "gpuhost:environment.requirementsLock");
      checkLockCudaWheels(text, args.toolkitVersion, "gpuhost:environment.requirementsLock");
      return text;
    } else if (!installsUnderRoot(args.connection) && hasRemoteIndex(env)) {
      throw new Error(
        "gpuhost:environment.requirementsLock is required: packages come from a remote index (pip's default or an https:// one), and pip installs from it only with --require-hashes; set it to a requirements file with --hash=sha256 for every package (pip-compile --generate-hashes)",
      );
    }
    return undefined;
  });
}

type HostCommand = ReturnType<typeof hostScript>;

/** The venv with the pinned serving stack (python-env.sh), from the hash lock where there is one. */
function venvCommand(
  name: string,
  args: ServingEnvironmentArgs,
  hashLock: string | undefined,
  user: HostCommand,
  parent: pulumi.Resource,
): HostCommand {
  const env = args.environment;
  return hostScript(
    `${name}-venv`,
    {
      connection: args.connection,
      script: `${SCRIPTS}/python-env.sh`,
      args: [
        env.venvPath,
        env.python,
        args.toolkitVersion,
        pinsLock(env, hashLock),
        ...indexArgs(env),
        ...(hashLock === undefined ? [] : ["--require-hashes"]),
        "--",
        ...requirements(env),
      ],
      // The lock reaches the host on standard input: too long for an argument, and not a secret.
      ...(hashLock === undefined ? {} : { stdin: hashLock }),
    },
    { parent, dependsOn: [user] },
  );
}

/** The optional JIT pre-warm, run again whenever the environment lock changes. */
function prewarmCommand(
  name: string,
  args: ServingEnvironmentArgs,
  workspace: pulumi.Output<string>,
  lock: pulumi.Output<string>,
  after: HostCommand[],
  parent: pulumi.Resource,
): HostCommand {
  const env = args.environment;
  return hostScript(
    `${name}-prewarm`,
    {
      connection: args.connection,
      script: `${SCRIPTS}/prewarm.sh`,
      args: [env.venvPath, workspace, env.serviceUser, args.cudaHome],
      triggers: [lock],
    },
    { parent, dependsOn: after },
  );
}

/**
 * `check()`'s result; what it throws is the stack config's fault, said as it is (PlainError: the
 * engine shows the sentence, not a stack trace).
 */
function checkedConfig<T>(check: () => T): T {
  try {
    return check();
  } catch (e) {
    throw new PlainError(e instanceof Error ? e.message : String(e));
  }
}
