/**
 * GpuServingHost: one GPU serving host, composed in provisioning order:
 *
 *   CudaToolkit ----------------------\
 *   ServingEnvironment (user, venv) ---+-> JIT workspace -> ServingService (units, switch)
 *                                                              |-> [ServiceComparison] (services.compare)
 *                                                              |-> VerifiedGeneration (gate, bench, capacity)
 *                                                              \-> ToolkitState (drift probe)
 *
 * The platform (components/platform.ts) is chosen once, in the program (index.ts) and handed over
 * as data; a platform with a preparation step gets it first, as a resource of its own.
 *
 * The service user and the venv do not wait for the toolkit (pip downloads while apt installs);
 * VerifiedGeneration and ToolkitState, which only read the host, run side by side.
 *
 * Drift: every `pulumi up` refreshes first (Pulumi.yaml), so ToolkitState re-probes the host; when
 * it drifted, ToolkitState's update re-runs the provisioning steps of what drifted. Each component
 * exports its share (its fields of the expected state and its repair steps, from the same plans
 * its Commands run); components/drift assembles them in provisioning order.
 */
import * as pulumi from "@pulumi/pulumi";
import type { BenchPlan, VerifyPolicy, Workload } from "../gate/base/schema";
import { CudaToolkit, type CudaToolkitOptions } from "./cuda-toolkit";
import { assembleDrift, preparationDrift, ToolkitState } from "./drift";
import { type HostPlatform, preparationOf, toolkitOptionsOn } from "./platform";
import { comparisonArgs, ServiceComparison, type ServiceComparisonArgs } from "./service-comparison";
import type { ServiceKind, ServicesConfig } from "./services/schema";
import { ServingService } from "./services/serving-service";
import { readModelConfig } from "./services/model-config";
import { unitName } from "./services/unit";
import type { EnvironmentConfig } from "./serving-env/schema";
import { ServingEnvironment } from "./serving-env/serving-environment";
import { toolkit as toolkitDescription } from "./cuda-catalog/catalog";
import { VerifiedGeneration, verificationArgs } from "./verified-generation";

/** The sections of the stack config a host is built from, validated (stack/config.ts). */
export interface ServingHostConfig {
  toolkit: CudaToolkitOptions;
  environment: EnvironmentConfig;
  services: ServicesConfig;
  verification: VerifyPolicy;
  benchmark: BenchPlan;
  workload: Workload;
}

export interface GpuServingHostArgs {
  /** The host's entry of config `hosts`: its GPUs (the comparison's capacity plan is per host). */
  host: { gpus: { count: number } };
  /** Its platform: connection (private keys as Pulumi secrets), server program, repository, preparation. */
  platform: HostPlatform;
  /** The stack config's sections it is built from (the whole validated config will do). */
  config: ServingHostConfig;
  /** The services' API key, a Pulumi secret. */
  apiKey?: pulumi.Output<string>;
  /**
   * The host is one worker of a fleet behind a router (config `router`): a gate that does not pass
   * is recorded (VerifiedGeneration `gateFailure`) and the router leaves the host out, instead of
   * failing the whole update.
   */
  fleetMember?: boolean;
}

/** The outputs the component records in its state, beside the child resources' own. */
const REGISTERED_OUTPUTS = [
  "toolkitFingerprint",
  "nvccVersion",
  "toolkitProof",
  "environmentLock",
  "jitWorkspace",
  "activeService",
  "activeUnit",
  "endpoint",
  "model",
] as const;

export class GpuServingHost extends pulumi.ComponentResource {
  /** The CUDA toolkit: repository, install, verification (components/cuda-toolkit). */
  public readonly toolkit: CudaToolkit;
  /** The service user, the venv and the JIT workspace (components/serving-env). */
  public readonly environment: ServingEnvironment;
  /** The services' units and the switch between them (components/services). */
  public readonly service: ServingService;
  /** The service that runs: the configured one, or the comparison's pick under `active: auto`. */
  public readonly activeService: pulumi.Output<ServiceKind>;
  /** Its unit file name, e.g. sglang-autoregressive.service. */
  public readonly activeUnit: pulumi.Output<string>;
  /** The gate, the benchmark and the capacity plan of the active service. */
  public readonly verification: VerifiedGeneration;
  /** With `services.compare`: the comparison of the services (per-service table, recommendation). */
  public readonly comparison?: ServiceComparison;
  /** The drift probe of what provisioning set up, and its repairs. */
  public readonly toolkitState: ToolkitState;
  /** The served model's config.json as read on the host (services/model-config.ts): the roofline's facts. */
  public readonly modelConfig: pulumi.Output<Record<string, string>>;

  /** CudaToolkit: hash of the release and every package version (keys the JIT cache and the lock). */
  public get toolkitFingerprint(): pulumi.Output<string> {
    return this.toolkit.fingerprint;
  }
  /** CudaToolkit: nvcc's version through CUDA_HOME, e.g. V13.0.88. */
  public get nvccVersion(): pulumi.Output<string> {
    return this.toolkit.nvccVersion;
  }
  /** CudaToolkit: what the proof-by-execution step did ("ran: ...", "compiled (no GPU to run it on)"). */
  public get toolkitProof(): pulumi.Output<string> {
    return this.toolkit.proof;
  }
  /** ServingEnvironment: the pins and the toolkit the venv was built for, hashed. */
  public get environmentLock(): pulumi.Output<string> {
    return this.environment.environmentLock;
  }
  /** ServingEnvironment: FLASHINFER_WORKSPACE_BASE, keyed by the toolkit. */
  public get jitWorkspace(): pulumi.Output<string> {
    return this.environment.jitWorkspace;
  }
  /** ServingService: the service's URL as seen on the host. */
  public get endpoint(): pulumi.Output<string> {
    return this.service.endpoint;
  }
  /** ServingService: the model id clients send. */
  public get model(): pulumi.Output<string> {
    return this.service.servedModelName;
  }

  constructor(name: string, args: GpuServingHostArgs, opts?: pulumi.ComponentResourceOptions) {
    super("gpuhost:index:GpuServingHost", name, {}, opts);
    const { config, platform, apiKey } = args;
    const { connection } = platform;
    const { toolkit, environment, service } = provision(name, args, this);

    // With `services.compare` the comparison decides which service is left active; everything after
    // it (verification, the drift probe and its repairs) follows that service, not the configured one.
    const sources = {
      ...config,
      connection,
      apiKey,
      model: service.servedModelName,
      stamps: service.stamps,
      timeScale: platform.timeScale ?? 1,
    };
    this.comparison = config.services.compare
      ? comparison(name, comparisonArgs({ ...sources, gpus: args.host.gpus.count }), service, this)
      : undefined;
    const active = this.comparison ? this.comparison.activeService : service.activeService;
    const activeStamp = pulumi.all([service.stamps, active]).apply(([st, kind]) => st[kind]!);
    const after = this.comparison ? [service, this.comparison] : [service];
    const parts = { toolkit, environment, service, comparison: this.comparison };
    this.toolkitState = driftProbe(name, platform, parts, active, activeStamp, { parent: this, dependsOn: after });
    this.verification = new VerifiedGeneration(
      `${name}-verified`,
      verificationArgs({
        ...sources,
        active,
        serviceIdentity: this.comparison ? activeStamp : service.activeUnitHash,
        activation: activationOf(parts, this.toolkitState),
        toolkitFingerprint: toolkit.fingerprint,
        environmentLock: environment.environmentLock,
        serviceProbes: (unit) => platform.serviceProbes(unit),
        // Behind a router, a host whose gate fails is left out of the fleet instead of failing the update.
        failureIsOutcome: args.fleetMember === true ? true : undefined,
      }),
      // Explicit order: ToolkitState's repair may restart the unit, so it runs first; the gate
      // never verifies a unit that a repair is about to restart, and verifies the repaired one.
      { parent: this, dependsOn: [...after, this.toolkitState] },
    );

    // After the gate: a repository id is in the service user's cache once SGLang has downloaded it.
    this.modelConfig = readModelConfig(
      `${name}-model-config`,
      { connection, modelPath: config.services.modelPath, serviceHome: config.environment.serviceHome },
      { parent: this, dependsOn: [this.verification] },
    );

    this.toolkit = toolkit;
    this.environment = environment;
    this.service = service;
    this.activeService = active;
    this.activeUnit = active.apply(unitName);
    this.registerOutputs(Object.fromEntries(REGISTERED_OUTPUTS.map((k) => [k, this[k]])));
  }
}

/** The provisioned parts of a host the checks after them read. */
interface HostParts {
  toolkit: CudaToolkit;
  environment: ServingEnvironment;
  service: ServingService;
  comparison?: ServiceComparison;
}

/** The preparation, then the toolkit and the environment side by side, then the services' units. */
function provision(name: string, args: GpuServingHostArgs, parent: GpuServingHost): HostParts {
  const { config, platform, apiKey } = args;
  const { connection } = platform;
  const { environment: env, services: s } = config;
  const release = config.toolkit.release;
  const cudaHome = toolkitDescription(release).root;

  // Children wait for their parent component, and the components wait for the preparation.
  const prepared = preparationOf(name, platform, { parent });
  const toolkit = new CudaToolkit(
    `${name}-toolkit`,
    { ...toolkitOptionsOn(platform, config.toolkit), connection, venvPath: env.venvPath },
    { parent, dependsOn: prepared },
  );
  const environment = new ServingEnvironment(
    `${name}-env`,
    { connection, environment: env, toolkitVersion: release, toolkitFingerprint: toolkit.fingerprint, cudaHome },
    { parent, dependsOn: prepared },
  );
  const service = new ServingService(
    `${name}-service`,
    {
      connection,
      services: s,
      program: platform.serverProgram,
      serviceUser: env.serviceUser,
      serviceHome: env.serviceHome,
      venvPath: env.venvPath,
      cudaHome,
      jitWorkspace: environment.jitWorkspace,
      environmentLock: environment.environmentLock,
      apiKey,
    },
    // The units run the toolkit's nvcc (FlashInfer's JIT): never start them before it is verified.
    { parent, dependsOn: [toolkit, environment] },
  );
  return { toolkit, environment, service };
}

/** With `services.compare`: the comparison, after the activation Command, so the two never switch units at the same time. */
function comparison(
  name: string,
  args: ServiceComparisonArgs,
  service: ServingService,
  parent: GpuServingHost,
): ServiceComparison {
  return new ServiceComparison(`${name}-compare`, args, { parent, dependsOn: [service, service.activation] });
}

/** ToolkitState: each part's share of the expected state and its repairs, for the service that runs. */
function driftProbe(
  name: string,
  platform: HostPlatform,
  parts: HostParts,
  active: pulumi.Output<ServiceKind>,
  activeStamp: pulumi.Output<string>,
  opts: pulumi.CustomResourceOptions,
): ToolkitState {
  const { toolkit, environment, service } = parts;
  const drift = pulumi
    .all([toolkit.drift, environment.drift, service.drift(active, activeStamp)])
    .apply((shares) => assembleDrift([preparationDrift(platform.preparation?.step), ...shares]));
  return new ToolkitState(
    `${name}-toolkit-state`,
    {
      connection: platform.connection,
      expected: drift.expected,
      repairs: drift.repairs,
      onDrift: "repair",
      ...service.apiKeyCheck,
    },
    opts,
  );
}

/**
 * The start the gate verifies: a comparison that measured again restarted the units itself, so its
 * run is part of the start, and so is a start ToolkitState's repair made (a restored unit, a rewritten key file).
 */
function activationOf(parts: HostParts, toolkitState: ToolkitState): pulumi.Output<string> {
  const { service, comparison } = parts;
  return pulumi
    .all([
      comparison ? pulumi.interpolate`${service.activationId} ${comparison.comparedAt}` : service.activationId,
      toolkitState.repairActivation,
    ])
    .apply(([started, repaired]) => (repaired ? `${started} repaired ${repaired}` : started));
}
