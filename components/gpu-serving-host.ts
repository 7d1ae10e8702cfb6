/**
 * GpuServingHost: one GPU serving host, composed in provisioning order:
 *
 *   CudaToolkit ----------------------\
 *   ServingEnvironment (user, venv) ---+-> JIT workspace -> ServingService (units, switch)
 *                                                              |-> VerifiedGeneration (gate, bench, capacity)
 *                                                              \-> ToolkitState (drift probe)
 *
 * The platform (components/platform.ts: SSH or local, or the simulated one from sim-host/) is chosen
 * once, in index.ts; a platform with a preparation step gets it first, as a resource of its own.
 *
 * The service user and the venv do not wait for the toolkit (pip downloads while apt installs);
 * VerifiedGeneration and ToolkitState, which only read the host, run side by side.
 *
 * Drift: every `pulumi up` refreshes first (Pulumi.yaml), so ToolkitState re-probes the host; when
 * it drifted, ToolkitState's update re-runs the provisioning steps of what drifted (the toolkit's
 * repository/install/verify, the unit installs, a restart of the active unit, the activation),
 * taken from the same builders the components' Commands use, then probes again.
 */
import * as pulumi from "@pulumi/pulumi";
import type { GpuhostConfig, HostConfig } from "./config";
import { CudaToolkit, cudaToolkitPlan } from "./cuda-toolkit";
import { type HostConnectionInput, hostScript } from "./host/script";
import type { HostPlatform } from "./platform";
import { ServingEnvironment } from "./serving-env/serving-environment";
import { toolkitKey } from "./serving-env/lock";
import { activationStep, API_KEY_FILE_SCRIPT, ServingService } from "./services/serving-service";
import { configuredServices, initialService, SERVICE_KINDS, type ServiceKind } from "./services/schema";
import { ServiceComparison } from "./service-comparison";
import { SloSchema } from "../gate/goodput";
import { WorkloadShapeSchema } from "../gate/workload";
import { pinnedEnvironment, UNIT_DIR, unitName } from "./services/unit";
import { toolkit as toolkitDescription } from "./cuda-catalog/catalog";
import {
  expectedToolkitState,
  restartUnitStep,
  TOOLKIT_FIELDS,
  ToolkitState,
  UNIT_FIELDS,
  unitContentField,
} from "./drift";
import { VerifiedGeneration } from "./verified-generation";

export interface GpuServingHostArgs {
  /** The host's entry of config `hosts`. */
  host: HostConfig;
  /** Its platform: connection (private keys as Pulumi secrets), server program, repository, preparation. */
  platform: HostPlatform;
  /** The whole validated stack config (toolkit, environment, services, gate, simulator). */
  config: GpuhostConfig;
  /** The services' API key, a Pulumi secret. */
  apiKey?: pulumi.Output<string>;
}

export class GpuServingHost extends pulumi.ComponentResource {
  public readonly toolkitFingerprint: pulumi.Output<string>;
  public readonly nvccVersion: pulumi.Output<string>;
  public readonly toolkitProof: pulumi.Output<string>;
  public readonly environmentLock: pulumi.Output<string>;
  public readonly jitWorkspace: pulumi.Output<string>;
  public readonly activeService: pulumi.Output<ServiceKind>;
  public readonly activeUnit: pulumi.Output<string>;
  public readonly endpoint: pulumi.Output<string>;
  public readonly model: pulumi.Output<string>;
  public readonly verification: VerifiedGeneration;
  /** With `services.compare`: the comparison of the services (per-service table, recommendation). */
  public readonly comparison?: ServiceComparison;
  public readonly toolkitState: ToolkitState;

  constructor(name: string, args: GpuServingHostArgs, opts?: pulumi.ComponentResourceOptions) {
    super("gpuhost:index:GpuServingHost", name, {}, opts);
    const { config, platform } = args;
    const { connection } = platform;
    const release = config.toolkit.release;
    const cudaHome = toolkitDescription(release).root;
    const env = config.environment;
    // The platform's own repository, unless the stack names one.
    const toolkitOptions =
      platform.toolkitRepository && config.toolkit.repository.url === undefined
        ? { ...config.toolkit, repository: { ...config.toolkit.repository, ...platform.toolkitRepository } }
        : config.toolkit;

    // Children wait for their parent component, and the components wait for the preparation.
    const prepared = platform.preparation
      ? [
          hostScript(
            `${name}-prepare`,
            {
              connection,
              script: platform.preparation.step.script,
              args: platform.preparation.step.args,
              triggers: platform.preparation.triggers,
            },
            { parent: this },
          ),
        ]
      : [];

    const toolkit = new CudaToolkit(
      `${name}-toolkit`,
      { ...toolkitOptions, connection },
      { parent: this, dependsOn: prepared },
    );

    const environment = new ServingEnvironment(
      `${name}-env`,
      { connection, environment: env, toolkitVersion: release, toolkitFingerprint: toolkit.fingerprint, cudaHome },
      { parent: this, dependsOn: prepared },
    );

    const service = new ServingService(
      `${name}-service`,
      {
        connection,
        services: config.services,
        program: platform.serverProgram,
        serviceUser: env.serviceUser,
        serviceHome: env.serviceHome,
        venvPath: env.venvPath,
        cudaHome,
        jitWorkspace: environment.jitWorkspace,
        environmentLock: environment.environmentLock,
        apiKey: args.apiKey,
      },
      // The units run the toolkit's nvcc (FlashInfer's JIT): never start them before it is verified.
      { parent: this, dependsOn: [toolkit, environment] },
    );

    // With `services.compare` the comparison decides which service is left active; everything after
    // it (verification, the drift probe and its repairs) follows that service, not the configured one.
    this.comparison = config.services.compare
      ? new ServiceComparison(
          `${name}-compare`,
          comparisonArgs(args, service, connection),
          // After the activation Command, so the two never switch units at the same time.
          { parent: this, dependsOn: [service, service.activation] },
        )
      : undefined;
    const activeKind: pulumi.Output<ServiceKind> = this.comparison
      ? this.comparison.activeService
      : service.activeService;
    const unit = activeKind.apply(unitName);
    const activeStamp = pulumi.all([service.stamps, activeKind]).apply(([st, kind]) => st[kind]!);
    const probe = unit.apply((u) => platform.serviceProbes(u));
    const after = this.comparison ? [service, this.comparison] : [service];

    // What repairs drift, in provisioning order: the toolkit first (the units run its nvcc), then
    // each unit file, a restart of the active unit when its file was restored, and the activation
    // (which also repairs enabled/active and keeps exactly the active service running).
    const plan = cudaToolkitPlan(toolkitOptions);
    const preparation = platform.preparation ? [{ fields: [...TOOLKIT_FIELDS], ...platform.preparation.step }] : [];
    const repairs = pulumi.all([service.steps, unit, activeKind, activeStamp]).apply(([steps, u, kind, stamp]) => [
      ...preparation,
      ...[plan.repository, plan.install, plan.verify].map((step) => ({ fields: [...TOOLKIT_FIELDS], ...step })),
      ...Object.entries(steps.units).map(([f, step]) => ({
        fields: [unitContentField(`${UNIT_DIR}/${f}`)],
        ...step,
      })),
      restartUnitStep(`${UNIT_DIR}/${u}`),
      { fields: [UNIT_FIELDS], ...activationStep(kind, stamp) },
      // the API key file, deleted or changed on the host: rewritten from the secret (key on stdin)
      ...(args.apiKey
        ? [
            {
              fields: ["apiKeyFile"],
              script: API_KEY_FILE_SCRIPT,
              args: [service.apiKeyFile],
              stdin: "apiKey" as const,
            },
          ]
        : []),
    ]);

    const unitPath = pinnedEnvironment({
      cudaHome,
      // The units put the venv on PATH only where SGLang runs from it (as renderServiceUnits does).
      venvPath: platform.serverProgram.kind === "sglang" ? env.venvPath : undefined,
      jitCacheDir: "",
    }).find(([k]) => k === "PATH")![1];
    this.toolkitState = new ToolkitState(
      `${name}-toolkit-state`,
      {
        connection,
        expected: pulumi.all([service.unitHashes, toolkit.fingerprint, unit]).apply(([hashes, fingerprint, active]) =>
          expectedToolkitState({
            release,
            unitPath,
            jitBase: env.jitCacheBase,
            jitKey: toolkitKey(release, fingerprint),
            units: Object.fromEntries(
              SERVICE_KINDS.map(unitName)
                .filter((u) => hashes[u] !== undefined)
                .map((u) => [
                  `${UNIT_DIR}/${u}`,
                  {
                    sha256: hashes[u],
                    enabled: u === active ? "enabled" : "disabled",
                    active: u === active ? "active" : "inactive",
                  },
                ]),
            ),
          }),
        ),
        onDrift: "repair",
        repairs,
        ...(args.apiKey
          ? { apiKey: args.apiKey, apiKeyFile: { path: service.apiKeyFile, script: API_KEY_FILE_SCRIPT } }
          : {}),
      },
      { parent: this, dependsOn: after },
    );

    this.verification = new VerifiedGeneration(
      `${name}-verified`,
      {
        url: gateUrl(connection, config.services.host, config.services.port),
        model: service.servedModelName,
        apiKey: args.apiKey,
        serviceIdentity: this.comparison ? activeStamp : service.activeUnitHash,
        toolkitFingerprint: toolkit.fingerprint,
        environmentLock: environment.environmentLock,
        verifyPolicy: config.verification,
        benchPlan: config.benchmark,
        workload: config.workload,
        speculative: activeKind.apply((kind) => speculativeOf(config, kind)) as pulumi.Output<Speculative>,
        serviceStateCommand: probe.apply((p) => p?.state) as pulumi.Output<string[]>,
        serviceLogsCommand: probe.apply((p) => p?.logs) as pulumi.Output<string[]>,
        hostAccess: hostAccess(connection, unit, config.services.host, config.services.port),
        // Behind a router, a host whose gate fails is left out of the fleet (components/router) instead of failing the update.
        failureIsOutcome: config.router !== undefined ? true : undefined,
      },
      // Explicit order: ToolkitState's repair may restart the unit, so it runs first; the gate
      // never verifies a unit that a repair is about to restart, and verifies the repaired one.
      { parent: this, dependsOn: [...after, this.toolkitState] },
    );

    this.toolkitFingerprint = toolkit.fingerprint;
    this.nvccVersion = toolkit.nvccVersion;
    this.toolkitProof = toolkit.proof;
    this.environmentLock = environment.environmentLock;
    this.jitWorkspace = environment.jitWorkspace;
    this.activeService = activeKind;
    this.activeUnit = unit;
    this.endpoint = service.endpoint;
    this.model = service.servedModelName;
    this.registerOutputs({
      toolkitFingerprint: this.toolkitFingerprint,
      nvccVersion: this.nvccVersion,
      toolkitProof: this.toolkitProof,
      environmentLock: this.environmentLock,
      jitWorkspace: this.jitWorkspace,
      activeService: this.activeService,
      activeUnit: this.activeUnit,
      endpoint: this.endpoint,
      model: this.model,
    });
  }
}

type Speculative = { algorithm: string; draftModelPath: string; acceptanceFloor: number };

/** A service's draft and acceptance floor (default: the configured active one); undefined for autoregressive. */
export function speculativeOf(
  config: GpuhostConfig,
  active: ServiceKind = initialService(config.services),
): Speculative | undefined {
  if (active === "autoregressive") return undefined;
  const spec = config.services[active];
  if (!spec) return undefined;
  return {
    algorithm: active === "eagle3" ? "EAGLE3" : "DFLASH",
    draftModelPath: spec.draftModelPath,
    acceptanceFloor: spec.acceptanceFloor,
  };
}

/**
 * The URL of the service as seen on the host. The gate runs where `pulumi up` runs: for local and
 * simulated hosts that is the host itself; for SSH hosts the gate reaches this URL through an SSH
 * tunnel (see hostAccess), because the serving port is bound to the host's loopback by default and,
 * as in the story (docs/story.md), a machine that reaches SSH may not reach the serving port.
 */
export function gateUrl(connection: HostConnectionInput, bindHost: string, port: number): string {
  if (connection.kind !== "ssh") return `http://127.0.0.1:${port}`;
  const seenOnHost = bindHost === "0.0.0.0" || bindHost === "localhost" ? "127.0.0.1" : bindHost;
  return `http://${seenOnHost}:${port}`;
}

/**
 * For SSH hosts: what VerifiedGeneration needs to tunnel to the service and to read the unit's state
 * and logs over the same connection (a secret: it carries the private key). Undefined otherwise.
 */
export function hostAccess(
  connection: HostConnectionInput,
  unit: pulumi.Input<string>,
  bindHost: string,
  port: number,
) {
  if (connection.kind !== "ssh") return undefined;
  const remoteHost = new URL(gateUrl(connection, bindHost, port)).hostname;
  return pulumi.all([pulumi.output(connection), unit]).apply(([conn, unitName]) => ({
    connection: conn,
    unit: unitName,
    remoteHost,
    remotePort: port,
  }));
}

/**
 * The comparison's inputs: the same gate policy and the benchmark's levels and request length as
 * VerifiedGeneration, the capacity workload as the job, and the simulated host's time scale.
 */
function comparisonArgs(args: GpuServingHostArgs, service: ServingService, connection: HostConnectionInput) {
  const { config, platform, host } = args;
  const s = config.services;
  const bench = config.benchmark;
  const services = configuredServices(s);
  const drafts: Partial<Record<ServiceKind, Speculative>> = {};
  for (const kind of services) {
    const spec = speculativeOf(config, kind);
    if (spec) drafts[kind] = spec;
  }
  const perService = config.verification.deadlineSeconds + bench.deadlineSeconds + s.timeoutStartSec + 120;
  return {
    connection: pulumi.output(connection) as unknown as pulumi.Output<Record<string, unknown>>,
    url: gateUrl(connection, s.host, s.port),
    tunnel:
      connection.kind === "ssh"
        ? { remoteHost: new URL(gateUrl(connection, s.host, s.port)).hostname, remotePort: s.port }
        : undefined,
    model: service.servedModelName,
    apiKey: args.apiKey,
    stamps: service.stamps,
    services,
    drafts,
    plan: {
      shape: WorkloadShapeSchema.parse({
        outputTokens: { distribution: "fixed", tokens: bench.sweepMaxTokens },
        ignoreEos: bench.ignoreEos,
      }),
      slo: SloSchema.parse({}),
      levels: [...bench.concurrency],
      requestsPerLevel: bench.requestsPerConcurrency,
      repeats: 1,
      requestTimeoutSeconds: bench.requestTimeoutSeconds,
      timeScale: platform.serverProgram.kind === "simulator" ? platform.serverProgram.timeScale : 1,
      verifyPolicy: config.verification,
      job: {
        purpose: "batch" as const,
        completions: config.workload.completions,
        outputTokensPerCompletion: config.workload.outputTokensPerCompletion,
        deadlineDays: config.workload.deadlineDays,
        gpusPerHost: Math.max(1, host.gpus.count),
      },
      auto: s.active === "auto",
      restore: initialService(s),
      acceptanceFloor: 1.5,
    },
    activateTimeoutSeconds: s.timeoutStartSec + 120,
    deadlineSeconds: services.length * perService,
  };
}
