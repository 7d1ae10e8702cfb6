/**
 * GpuServingHost: one GPU serving host, composed in provisioning order:
 *
 *   CudaToolkit ----------------------\
 *   ServingEnvironment (user, venv) ---+-> JIT workspace -> ServingService (units, switch)
 *                                                              |-> VerifiedGeneration (gate, bench, capacity)
 *                                                              \-> ToolkitState (drift probe)
 *
 * The service user and the venv do not wait for the toolkit (pip downloads while apt installs);
 * VerifiedGeneration and ToolkitState, which only read the host, run side by side.
 *
 * Drift: every `pulumi up` refreshes first (Pulumi.yaml), so ToolkitState re-probes the host; when
 * it drifted, ToolkitState's update re-runs the provisioning steps of what drifted (the toolkit's
 * repository/install/verify, the unit installs, a restart of the active unit, the activation),
 * taken from the same builders the components' Commands use, then probes again.
 */
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import type { GpuhostConfig, HostConfig } from "./config";
import { CudaToolkit, cudaToolkitPlan } from "./cuda-toolkit";
import type { HostConnectionInput } from "./host/script";
import { simShimDir } from "./host/sim/platform";
import { ServingEnvironment } from "./serving-env/serving-environment";
import { toolkitKey } from "./serving-env/lock";
import { ServingService } from "./services/serving-service";
import { SERVICE_KINDS } from "./services/schema";
import { pinnedEnvironment, UNIT_DIR, unitName } from "./services/unit";
import { toolkit as toolkitDescription } from "./toolkit/description";
import {
  expectedToolkitState,
  restartUnitStep,
  TOOLKIT_FIELDS,
  ToolkitState,
  UNIT_FIELDS,
  unitContentField,
} from "./toolkit-state";
import { VerifiedGeneration } from "./verified-generation";

export interface GpuServingHostArgs {
  /** The host's entry of config `hosts`. */
  host: HostConfig;
  /** Its connection, private keys as Pulumi secrets (config.ts hostConnection). */
  connection: HostConnectionInput;
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
  public readonly activeService: pulumi.Output<string>;
  public readonly activeUnit: pulumi.Output<string>;
  public readonly endpoint: pulumi.Output<string>;
  public readonly model: pulumi.Output<string>;
  public readonly verification: VerifiedGeneration;
  public readonly toolkitState: ToolkitState;

  constructor(name: string, args: GpuServingHostArgs, opts?: pulumi.ComponentResourceOptions) {
    super("gpuhost:index:GpuServingHost", name, {}, opts);
    const { config, connection } = args;
    const simulated = connection.kind === "simulated";
    const release = config.toolkit.release;
    const cudaHome = toolkitDescription(release).root;
    const env = config.environment;

    const toolkit = new CudaToolkit(`${name}-toolkit`, { ...config.toolkit, connection }, { parent: this });

    const environment = new ServingEnvironment(
      `${name}-env`,
      { connection, environment: env, toolkitVersion: release, toolkitFingerprint: toolkit.fingerprint, cudaHome },
      { parent: this },
    );

    const service = new ServingService(
      `${name}-service`,
      {
        connection,
        services: config.services,
        program: simulated
          ? {
              kind: "simulator",
              profile: config.simulator.profile,
              serviceProfiles: config.simulator.serviceProfiles,
              faults: config.simulator.faults,
              timeScale: config.simulator.timeScale,
            }
          : { kind: "sglang" },
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
    const probe = serviceProbes(connection, unit);
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
        serviceStateCommand: probe?.state,
        serviceLogsCommand: probe?.logs,
        hostAccess: hostAccess(connection, unit, config.services.host, config.services.port),
      },
      { parent: this, dependsOn: [service] },
    );

    // What repairs drift, in provisioning order: the toolkit first (the units run its nvcc), then
    // each unit file, a restart of the active unit when its file was restored, and the activation
    // (which also repairs enabled/active and keeps exactly the active service running).
    const plan = cudaToolkitPlan({ ...config.toolkit, connection });
    const activeUnitFile = `${UNIT_DIR}/${unit}`;
    const repairs = service.steps.apply((steps) => [
      ...[plan.repository, plan.install, plan.verify].map((step) => ({ fields: [...TOOLKIT_FIELDS], ...step })),
      ...Object.entries(steps.units).map(([u, step]) => ({ fields: [unitContentField(`${UNIT_DIR}/${u}`)], ...step })),
      restartUnitStep(activeUnitFile),
      { fields: [UNIT_FIELDS], ...steps.activate },
    ]);

    const unitPath = pinnedEnvironment({
      cudaHome,
      venvPath: simulated ? undefined : env.venvPath,
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
                    sha256: hashes[u]!,
                    enabled: u === unit ? "enabled" : "disabled",
                    active: u === unit ? "active" : "inactive",
                  },
                ]),
            ),
          }),
        ),
        onDrift: "repair",
        repairs,
      },
      { parent: this, dependsOn: [service] },
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

/**
 * The URL of the service as seen on the host. The gate runs where `pulumi up` runs: for local and
 * simulated hosts that is the host itself; for SSH hosts the gate reaches this URL through an SSH
 * tunnel (see hostAccess), because the serving port is bound to the host's loopback by default and,
 * as in the story, a machine that reaches SSH may not reach the serving port.
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
    connection: conn as unknown as Record<string, unknown>,
    unit: unitName,
    remoteHost,
    remotePort: port,
  }));
}

/** argv the gate runs locally to read the unit's state and logs; SSH hosts use hostAccess instead. */
export function serviceProbes(
  connection: HostConnectionInput,
  unit: string,
): { state: string[]; logs: string[] } | undefined {
  switch (connection.kind) {
    case "simulated": {
      const shims = simShimDir();
      // No PATH here: it would land in the resource's inputs and make every run a diff.
      const env = ["env", `GPUHOST_ROOT=${path.resolve(connection.root)}`];
      return {
        state: [...env, path.join(shims, "systemctl"), "show", "-p", "NRestarts,ActiveState", unit],
        logs: [...env, path.join(shims, "journalctl"), "-u", unit, "-n", "50", "--no-pager"],
      };
    }
    case "local":
      return {
        state: ["systemctl", "show", "-p", "NRestarts,ActiveState", unit],
        logs: ["journalctl", "-u", unit, "-n", "50", "--no-pager"],
      };
    case "ssh":
      return undefined;
  }
}
