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
import { API_KEY_FILE_SCRIPT, ServingService } from "./services/serving-service";
import { SERVICE_KINDS, type ServiceKind } from "./services/schema";
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

    const unit = unitName(config.services.active);
    const probe = platform.serviceProbes(unit);
    // What repairs drift, in provisioning order: the toolkit first (the units run its nvcc), then
    // each unit file, a restart of the active unit when its file was restored, and the activation
    // (which also repairs enabled/active and keeps exactly the active service running).
    const plan = cudaToolkitPlan(toolkitOptions);
    const activeUnitFile = `${UNIT_DIR}/${unit}`;
    const preparation = platform.preparation ? [{ fields: [...TOOLKIT_FIELDS], ...platform.preparation.step }] : [];
    const repairs = service.steps.apply((steps) => [
      ...preparation,
      ...[plan.repository, plan.install, plan.verify].map((step) => ({ fields: [...TOOLKIT_FIELDS], ...step })),
      ...Object.entries(steps.units).map(([u, step]) => ({ fields: [unitContentField(`${UNIT_DIR}/${u}`)], ...step })),
      restartUnitStep(activeUnitFile),
      { fields: [UNIT_FIELDS], ...steps.activate },
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
        expected: pulumi.all([service.unitHashes, toolkit.fingerprint]).apply(([hashes, fingerprint]) =>
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
                    enabled: u === unit ? "enabled" : "disabled",
                    active: u === unit ? "active" : "inactive",
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
      { parent: this, dependsOn: [service] },
    );

    this.verification = new VerifiedGeneration(
      `${name}-verified`,
      {
        url: gateUrl(connection, config.services.host, config.services.port),
        model: service.servedModelName,
        apiKey: args.apiKey,
        serviceIdentity: service.activeUnitHash,
        toolkitFingerprint: toolkit.fingerprint,
        environmentLock: environment.environmentLock,
        verifyPolicy: config.verification,
        benchPlan: config.benchmark,
        workload: config.workload,
        speculative: speculativeOf(config),
        serviceStateCommand: probe?.state,
        serviceLogsCommand: probe?.logs,
        hostAccess: hostAccess(connection, unit, config.services.host, config.services.port),
      },
      // Explicit order: ToolkitState's repair may restart the unit, so it runs first; the gate
      // never verifies a unit that a repair is about to restart, and verifies the repaired one.
      { parent: this, dependsOn: [service, this.toolkitState] },
    );

    this.toolkitFingerprint = toolkit.fingerprint;
    this.nvccVersion = toolkit.nvccVersion;
    this.toolkitProof = toolkit.proof;
    this.environmentLock = environment.environmentLock;
    this.jitWorkspace = environment.jitWorkspace;
    this.activeService = service.activeService;
    this.activeUnit = service.activeUnit;
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

/** The active service's draft and acceptance floor; undefined for the autoregressive service. */
export function speculativeOf(
  config: GpuhostConfig,
): { algorithm: string; draftModelPath: string; acceptanceFloor: number } | undefined {
  const active = config.services.active;
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
