/**
 * ServingService: the systemd units of the SGLang services (autoregressive, and EAGLE-3 / DFlash
 * where configured) and the switch that keeps exactly one of them running.
 *
 * Provisioning order: API key file -> one install per unit (content only, never a restart) ->
 * activation (stop the others, start the active one; restart it only when its stamp changed).
 * Drift repairs (ServingService.drift) keep that order: file, then restart, then the gate.
 */
import { createHash } from "node:crypto";
import * as pulumi from "@pulumi/pulumi";
import { hostScript, parseKeyValues, type HostConnectionInput } from "../host/script";
import { API_KEY_CREDENTIAL, execStartArgv, serverArgsFor, sglangCommand, type ServerProgram } from "./launch-args";
import type { DriftFragment } from "../drift/fragments";
import { restartUnitStep, UNIT_FIELDS, unitContentField } from "../drift/repair";
import { urlOnHost } from "./endpoint";
import { configuredServices, initialService, SERVICE_KINDS, type ServiceKind, type ServicesConfig } from "./schema";
import { keyedApiKeyHash } from "./stamp-key";
import { pinnedEnvironment, renderUnit, UNIT_DIR, unitHash, unitName } from "./unit";

const SCRIPTS = "components/services/scripts";

export interface ServingServiceArgs {
  connection: HostConnectionInput;
  /** The services knobs (config `services`), already validated. */
  services: ServicesConfig;
  /** What ExecStart runs in place of SGLang from the venv (the platform's); unset: SGLang from the venv. */
  program?: ServerProgram;
  /** The user the services run as (ServingEnvironment's). */
  serviceUser: string;
  /** WorkingDirectory= and the user's writable home. */
  serviceHome: string;
  venvPath: string;
  /** CUDA_HOME the units pin (/usr/local/cuda-13.0). */
  cudaHome: string;
  /** FLASHINFER_WORKSPACE_BASE (ServingEnvironment's, keyed by the toolkit). */
  jitWorkspace: pulumi.Input<string>;
  /** ServingEnvironment's lock: a changed environment restarts the active service. */
  environmentLock: pulumi.Input<string>;
  /** The API key (a Pulumi secret); unset: no --api-key. */
  apiKey?: pulumi.Input<string>;
  /** Root-only (0600) file holding the key as SGLang config (`api-key: "..."`). Default /etc/gpuhost/sglang-api-key.yaml. */
  apiKeyFile?: string;
}

export interface RenderedUnit {
  kind: ServiceKind;
  name: string;
  content: string;
}

/** The unit texts of every configured service: pure, shared by the component and the tests. */
export function renderServiceUnits(
  a: Omit<ServingServiceArgs, "connection" | "jitWorkspace" | "environmentLock" | "apiKey"> & {
    jitWorkspace: string;
    apiKey: boolean;
  },
): RenderedUnit[] {
  const configured = configuredServices(a.services);
  const command = a.program?.command ?? sglangCommand(a.venvPath);
  const apiKeyFile = a.apiKeyFile ?? DEFAULT_API_KEY_FILE;
  return configured.map((kind) => ({
    kind,
    name: unitName(kind),
    content: renderUnit({
      kind,
      platform: a.program?.platform ?? "real",
      execStart: execStartArgv(command, serverArgsFor(kind, a.services, { apiKey: a.apiKey })),
      user: a.serviceUser,
      group: a.serviceUser,
      workingDirectory: a.serviceHome,
      environment: [...unitEnvironment({ ...a, jitCacheDir: a.jitWorkspace }), ...(a.program?.environment[kind] ?? [])],
      apiKeyCredential: a.apiKey ? { name: API_KEY_CREDENTIAL, file: apiKeyFile } : undefined,
      readWritePaths: [a.serviceHome, a.jitWorkspace],
      timeoutStartSec: a.services.timeoutStartSec,
      restart: a.services.restart,
    }),
  }));
}

/**
 * The environment every unit pins: the toolkit, the keyed JIT cache, and the venv on PATH where
 * SGLang runs from it (a platform's own program does not).
 */
export function unitEnvironment(a: {
  cudaHome: string;
  venvPath: string;
  jitCacheDir: string;
  program?: ServerProgram;
}): Array<[string, string]> {
  return pinnedEnvironment({
    cudaHome: a.cudaHome,
    venvPath: a.program === undefined ? a.venvPath : undefined,
    jitCacheDir: a.jitCacheDir,
  });
}

export const DEFAULT_API_KEY_FILE = "/etc/gpuhost/sglang-api-key.yaml";

/** A host script (relative to the project root) and its arguments, as a Command runs it. */
export interface ServiceStep<A = string> {
  script: string;
  args: A[];
}

/** install-unit.sh's content argument: base64, so the unit text reaches the host byte for byte. */
export function unitContentArg(content: string): string {
  return Buffer.from(content).toString("base64");
}

/** The API key file's script: writes it from the key on stdin; `--check PATH` compares without writing. */
export const API_KEY_FILE_SCRIPT = `${SCRIPTS}/api-key-file.sh`;

/** The step that installs one unit file (content only, never a restart). */
export function unitInstallStep<A = string>(unit: string, contentArg: A): ServiceStep<string | A> {
  return { script: `${SCRIPTS}/install-unit.sh`, args: [unit, contentArg] };
}

/** The step that makes ACTIVE the one running service (restarting it only when STAMP changed). */
export function activationStep<A = string>(active: ServiceKind, stamp: A): ServiceStep<string | A> {
  const others = SERVICE_KINDS.filter((k) => k !== active).map(unitName);
  return { script: `${SCRIPTS}/activate.sh`, args: [unitName(active), stamp, ...others] };
}

/** Every step ServingService runs on the host for its units, by unit name, then the activation. */
export interface ServiceSteps {
  units: Record<string, ServiceStep>;
  activate: ServiceStep;
}

type HostCommand = ReturnType<typeof hostScript>;
type RenderedUnits = pulumi.Output<RenderedUnit[]>;

/** The API key file, written from the secret on stdin; removed with the service. */
function apiKeyFileCommand(
  name: string,
  connection: HostConnectionInput,
  apiKey: pulumi.Input<string>,
  apiKeyFile: string,
  parent: pulumi.Resource,
): HostCommand {
  return hostScript(
    `${name}-api-key-file`,
    {
      connection,
      script: API_KEY_FILE_SCRIPT,
      args: [apiKeyFile],
      stdin: pulumi.secret(pulumi.output(apiKey).apply((k) => `${k}\n`)),
      deleteScript: `${SCRIPTS}/remove-api-key-file.sh`,
      deleteArgs: [apiKeyFile],
    },
    { parent, deleteBeforeReplace: true },
  );
}

/** One install per configured unit (content only, never a restart), after the key file its units read. */
function unitInstalls(
  name: string,
  args: ServingServiceArgs,
  units: RenderedUnits,
  keyFile: HostCommand | undefined,
  parent: pulumi.Resource,
): HostCommand[] {
  // The set of units is known from config alone, so resources can be declared before the text is.
  return configuredServices(args.services).map((kind) =>
    hostScript(
      `${name}-unit-${kind}`,
      {
        connection: args.connection,
        ...unitInstallStep(
          unitName(kind),
          units.apply((u) => unitContentArg(contentOf(u, kind))),
        ),
        deleteScript: `${SCRIPTS}/remove-unit.sh`,
        deleteArgs: [unitName(kind)],
      },
      // Replaced resources must delete first: the old delete would otherwise remove the new unit file.
      { parent, deleteBeforeReplace: true, dependsOn: keyFile ? [keyFile] : [] },
    ),
  );
}

/**
 * Each service's restart stamp (its unit, the lock, the API key's keyed hash): a hash, public. The
 * stamp follows the API key (a rotated key must restart the service), keyed with the stack's secret
 * StampKey: a plain sha256 of the key in state and on the host would be an offline oracle.
 */
function restartStamps(
  name: string,
  args: ServingServiceArgs,
  units: RenderedUnits,
  parent: pulumi.Resource,
): pulumi.Output<Partial<Record<ServiceKind, string>>> {
  const apiKeyHash = keyedApiKeyHash(name, args.apiKey ? pulumi.secret(args.apiKey) : undefined, parent);
  return pulumi
    .all([units, args.environmentLock, apiKeyHash])
    .apply(([u, lock, keyHash]) =>
      Object.fromEntries(u.map((x) => [x.kind, unitHash(x.content, `${lock}\0${keyHash}`)])),
    );
}

export class ServingService extends pulumi.ComponentResource {
  /** The running service's kind (autoregressive | eagle3 | dflash). */
  public readonly activeService: pulumi.Output<ServiceKind>;
  /** Its unit name, e.g. sglang-autoregressive.service. */
  public readonly activeUnit: pulumi.Output<string>;
  /** sha256 of the active unit's text and environment: what a restart is keyed on. */
  public readonly activeUnitHash: pulumi.Output<string>;
  /** The OpenAI-compatible endpoint as seen on the host itself. */
  public readonly endpoint: pulumi.Output<string>;
  /** Where the API key file is on the host (only meaningful with an API key). */
  public readonly apiKeyFile: string;
  /** The model id clients send (served model name, or the model path). */
  public readonly servedModelName: pulumi.Output<string>;
  /** sha256 of every configured unit's text, by unit name (the drift probe compares these). */
  public readonly unitHashes: pulumi.Output<Record<string, string>>;
  /**
   * The unit install and activation steps exactly as this component's Commands run them, as plain
   * data: ToolkitState re-runs them when a unit drifted on the host (Commands have no read).
   */
  public readonly steps: pulumi.Output<ServiceSteps>;
  /** Each configured service's activation stamp, by kind (what ServiceComparison activates them with). */
  public readonly stamps: pulumi.Output<Partial<Record<ServiceKind, string>>>;
  /** The activation Command: what a comparison of the services waits for. */
  public readonly activation: pulumi.Resource;
  /**
   * The host's record of the configured service's last start (activate.sh's `activation=` id): it
   * changes with every start the activation makes, a reverted rollout's included, and not otherwise.
   */
  public readonly activationId: pulumi.Output<string>;
  /** With an API key: what ToolkitState compares the key file on the host with, and how it rewrites it. */
  public readonly apiKeyCheck?: {
    apiKey: pulumi.Input<string>;
    apiKeyFile: { path: string; script: string; credential: string };
  };
  /** PATH as the units set it (the drift probe checks `which nvcc` through it). */
  private readonly unitPath: string;

  constructor(name: string, args: ServingServiceArgs, opts?: pulumi.ComponentResourceOptions) {
    super("gpuhost:index:ServingService", name, {}, opts);
    const s = args.services;
    const apiKeyFile = args.apiKeyFile ?? DEFAULT_API_KEY_FILE;
    this.apiKeyFile = apiKeyFile;
    this.apiKeyCheck = args.apiKey
      ? {
          apiKey: args.apiKey,
          apiKeyFile: { path: apiKeyFile, script: API_KEY_FILE_SCRIPT, credential: API_KEY_CREDENTIAL },
        }
      : undefined;
    this.unitPath = unitEnvironment({ ...args, jitCacheDir: "" }).find(([k]) => k === "PATH")![1];
    const units = pulumi
      .output(args.jitWorkspace)
      .apply((jitWorkspace) =>
        renderServiceUnits({ ...args, jitWorkspace, apiKey: args.apiKey !== undefined, apiKeyFile }),
      );
    const keyFile = args.apiKey ? apiKeyFileCommand(name, args.connection, args.apiKey, apiKeyFile, this) : undefined;
    const installs = unitInstalls(name, args, units, keyFile, this);
    const stamps = restartStamps(name, args, units, this);
    this.stamps = pulumi.unsecret(stamps);
    const active = initialService(s);
    const stamp = stamps.apply((st) => {
      if (!st[active]) throw new Error(`service ${active} is not configured`);
      return st[active];
    });
    const activation = hostScript(
      `${name}-activate`,
      { connection: args.connection, ...activationStep(active, stamp) },
      { parent: this, dependsOn: installs },
    );
    this.activation = activation;
    this.activationId = activation.stdout.apply((out) => parseKeyValues(out).activation ?? "");

    this.activeService = pulumi.output(active);
    this.activeUnit = pulumi.output(unitName(active));
    this.activeUnitHash = pulumi.unsecret(stamp);
    this.endpoint = pulumi.output(urlOnHost(s.host, s.port));
    this.servedModelName = pulumi.output(s.servedModelName ?? s.modelPath);
    this.unitHashes = units.apply((u) =>
      Object.fromEntries(u.map((x) => [x.name, createHash("sha256").update(x.content).digest("hex")])),
    );
    // The stamp is a hash (of the unit, the lock and the API key's keyed hash), public like activeUnitHash.
    this.steps = pulumi.all([units, this.activeUnitHash]).apply(([u, st]) => ({
      units: Object.fromEntries(u.map((x) => [x.name, unitInstallStep(x.name, unitContentArg(x.content))])),
      activate: activationStep(active, st),
    }));
    this.registerOutputs({
      activeService: this.activeService,
      activeUnit: this.activeUnit,
      activeUnitHash: this.activeUnitHash,
      endpoint: this.endpoint,
      servedModelName: this.servedModelName,
      unitHashes: this.unitHashes,
      steps: this.steps,
      stamps: this.stamps,
      activationId: this.activationId,
    });
  }

  /**
   * Its share of ToolkitState (components/drift), with `active` the running service (the configured
   * one, or the comparison's pick) started with `stamp`: each unit file's content, the active unit
   * enabled and running and the others not, the units' PATH (the API key file and the key the
   * active service runs with are ToolkitState's apiKey inputs). Repaired in provisioning order: the
   * API key file rewritten from the secret (stdin; systemd cannot start a unit whose credential file
   * is missing), a unit file re-installed, the active unit restarted after its file was restored or
   * when it runs with another key (the process started from the edited file, or the old key), then
   * the activation. A step that starts the service prints its new activation id (ToolkitState's
   * repairActivation), and the gate verifies that start in the same update.
   */
  public drift(active: pulumi.Input<ServiceKind>, stamp: pulumi.Input<string>): pulumi.Output<DriftFragment> {
    return pulumi.all([this.steps, this.unitHashes, active, stamp]).apply(([steps, hashes, kind, st]) => {
      const running = unitName(kind);
      const state = (u: string) =>
        u === running ? { enabled: "enabled", active: "active" } : { enabled: "disabled", active: "inactive" };
      return {
        expected: {
          unitPath: this.unitPath,
          units: Object.fromEntries(
            Object.entries(hashes).map(([u, sha256]) => [`${UNIT_DIR}/${u}`, { sha256, ...state(u) }]),
          ),
        },
        repairs: [
          ...(this.apiKeyCheck
            ? [
                {
                  fields: ["apiKeyFile"],
                  script: API_KEY_FILE_SCRIPT,
                  args: [this.apiKeyFile],
                  stdin: "apiKey" as const,
                },
              ]
            : []),
          ...Object.entries(steps.units).map(([u, step]) => ({
            fields: [unitContentField(`${UNIT_DIR}/${u}`)],
            ...step,
          })),
          restartUnitStep(`${UNIT_DIR}/${running}`),
          { fields: [UNIT_FIELDS], ...activationStep(kind, st) },
        ],
      };
    });
  }
}

function contentOf(units: RenderedUnit[], kind: ServiceKind): string {
  const unit = units.find((u) => u.kind === kind);
  if (!unit) throw new Error(`service ${kind} is not configured`);
  return unit.content;
}
