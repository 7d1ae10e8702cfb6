/**
 * The stack configuration: ONE zod schema holding every knob of gpuhost with its default and
 * description. Sections are composed from the schemas their owners keep (gate/base/schema.ts,
 * components' services/schema.ts, serving-env/schema.ts, host/connection.ts, and the simulated
 * platform's sim-host/config.ts); docs/configuration.md is generated from this schema
 * (stack/config-doc.ts), so the reference cannot fall behind.
 *
 * Each top-level key is one Pulumi config key in the `gpuhost` namespace (`gpuhost:services`, ...).
 * Secrets are separate keys read with getSecret (a secret nested in an object would make the whole
 * object, and everything computed from it, secret): `gpuhost:apiKey`, and the private keys that
 * `privateKeySecret` names.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import { answersFileIssue, BenchPlanSchema, VerifyPolicySchema, WorkloadSchema } from "../gate/base/schema";
import { cudaToolkitOptionsSchema } from "../components/cuda-toolkit/options";
import { hostKeyPolicySchema } from "../components/host-key";
import { bastionSchema, localConnectionSchema, sshConnectionSchema } from "../components/host/connection";
import type { HostConnectionInput } from "../components/host/script";
import { SIM_HOME, SimulatorSchema, simulatedConnectionConfig, underSimHome } from "../sim-host/config";
import { simulatedConnection } from "../sim-host/platform";
import { EnvironmentSchema } from "../components/serving-env/schema";
import { ServicesSchema } from "../components/services/schema";
import { PlainError } from "../components/plain-error";
import { faultNameSchema } from "../simulator/faults";
import { groupOf, routerConfigIssues, RouterSchema } from "../components/router/schema";
import { attentionBackendIssues, toolkitIssues } from "../physics/preflight";
import { driftCheckSchema } from "../components/drift-check/schema";
import { embeddedPassphraseRefusal, realMachines, usesEmbeddedPassphrase } from "../engine/pulumi";
import { ephemeralPortWarning } from "../ports";

export const CONFIG_NAMESPACE = "gpuhost";

/** Whether a config key was set with --secret (exported by the SDK's runtime, missing from its typings). */
function isConfigSecret(fullKey: string): boolean {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the module is in the SDK at run time but not in its type declarations
  const runtimeConfig = require("@pulumi/pulumi/runtime/config") as { isConfigSecret(k: string): boolean };
  return runtimeConfig.isConfigSecret(fullKey);
}

/** Name of another config key of this stack that holds a secret (set with `pulumi config set --secret`). */
const secretKeyName = z
  .string()
  .regex(/^[A-Za-z][A-Za-z0-9_-]*$/, "must be a config key name (letters, digits, '_', '-')");

// The SSH connection schema of the host layer, with each private key named by the config key that
// holds it as a secret instead of the key text: the one schema, two ways of holding the key.
export const sshConnectionConfig = sshConnectionSchema
  .omit({ privateKey: true, bastion: true })
  .extend({
    hostKeyPolicy: hostKeyPolicySchema,
    privateKeySecret: secretKeyName
      .default("sshPrivateKey")
      .describe(
        "Config key holding the private key text as a secret: `pulumi config set --secret sshPrivateKey < key`.",
      ),
    bastion: bastionSchema
      .omit({ privateKey: true })
      .extend({
        privateKeySecret: secretKeyName.describe("Config key holding the bastion's private key as a secret."),
        hostKeyPolicy: hostKeyPolicySchema,
      })
      .strict()
      .optional()
      .describe("Jump host the SSH connection goes through."),
  })
  .strict()
  .superRefine((c, ctx) => {
    for (const [hop, path] of [
      [c, []],
      [c.bastion, ["bastion"]],
    ] as const) {
      if (hop?.hostKey !== undefined && hop.hostKeyPolicy !== "pinned")
        ctx.addIssue({
          code: "custom",
          path: [...path, "hostKeyPolicy"],
          message: `is ${hop.hostKeyPolicy}, but hostKey is set: a set hostKey is always enforced (drop one of the two)`,
        });
    }
  })
  .describe("Over SSH; commands run through `sudo -n` unless the user is root.");

export const HostSchema = z
  .object({
    name: z
      .string()
      .regex(/^[a-z0-9][a-z0-9-]{0,62}$/, "must be lowercase letters, digits and '-' (it names resources and folders)")
      .describe("Name of the host; names its resources and its stack outputs."),
    connection: z
      .discriminatedUnion("kind", [
        sshConnectionConfig,
        // A root and a tools folder are the simulated platform's to hand over, never a stack's to set.
        localConnectionSchema.pick({ kind: true }).strict().describe("This machine."),
        simulatedConnectionConfig,
      ])
      .describe("How gpuhost reaches the host (kind: ssh | local | simulated)."),
    gpus: z
      .object({
        count: z
          .number()
          .int()
          .min(0)
          .max(64)
          .default(0)
          .describe("GPUs on the host (0: no GPU checks, e.g. simulated)."),
        model: z
          .string()
          .regex(/^[A-Za-z0-9 ._()-]+$/)
          .optional()
          .describe("GPU model, for outputs and the simulator's reports."),
        computeCapability: z
          .string()
          .regex(/^[0-9]{1,2}\.[0-9]$/, "must look like 12.0")
          .optional()
          .describe("Compute capability of the GPUs (SM 12.x needs CUDA >= 12.9 for FlashInfer)."),
      })
      .strict()
      .prefault({})
      .describe("The GPUs the host is expected to have."),
    port: z
      .number()
      .int()
      .min(1)
      .max(65535)
      .optional()
      .describe(
        "The serving port on this host; default services.port. Hosts that share one machine (simulated ones) each need their own.",
      ),
    simulatorFaults: z
      .array(faultNameSchema)
      .optional()
      .describe(
        "Simulated hosts only: faults of this host's simulator, added to simulator.faults (one host of a fleet that misbehaves).",
      ),
  })
  .strict();

/** CudaToolkit's knobs, as its owner declares them (components/cuda-toolkit/options.ts). */
export const ToolkitSchema = cudaToolkitOptionsSchema.describe(
  "The CUDA toolkit every service compiles and runs with: the full cuda-toolkit-13-0 from NVIDIA's apt repository.",
);

const apiKey = z
  .string()
  .regex(/^[A-Za-z0-9._~+/=-]{16,256}$/, "must be 16-256 characters of letters, digits and ._~+/=-")
  .optional()
  .describe(
    "The services' API key (`--api-key`), a secret: `pulumi config set --secret apiKey ...`. Written to a root-only (0600) file the service reads as a systemd credential through SGLang's --config, never argv; unset: no key (keep host 127.0.0.1).",
  );

/** What runs beside the hosts to operate them: the scheduled drift check (components/drift-check). */
export const OperationsSchema = z
  .object({
    driftCheck: driftCheckSchema(sshConnectionConfig).optional(),
  })
  .strict()
  .describe("Operating the stack: the drift check on a schedule.");

export const ConfigSchema = z
  .object({
    hosts: z.array(HostSchema).min(1).describe("The GPU serving hosts; each becomes one GpuServingHost."),
    toolkit: ToolkitSchema.prefault({}),
    environment: EnvironmentSchema.prefault({}),
    services: ServicesSchema.prefault({}),
    apiKey,
    verification: VerifyPolicySchema.prefault({}).superRefine(answersFileIssue),
    benchmark: BenchPlanSchema.prefault({}),
    workload: WorkloadSchema.prefault({}),
    simulator: SimulatorSchema.prefault({}),
    router: RouterSchema.optional(),
    operations: OperationsSchema.prefault({}),
  })
  .strict()
  .superRefine((c, ctx) => {
    if (c.services.host !== "127.0.0.1" && c.services.host !== "localhost" && c.apiKey === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["apiKey"],
        message: `services.host ${c.services.host} exposes the API beyond loopback: set an API key (pulumi config set --secret apiKey ...)`,
      });
    }
    const seen = new Set<string>();
    c.hosts.forEach((h, i) => {
      if (seen.has(h.name))
        ctx.addIssue({ code: "custom", path: ["hosts", i, "name"], message: `duplicate host name '${h.name}'` });
      seen.add(h.name);
      if (h.simulatorFaults !== undefined && h.connection.kind !== "simulated")
        ctx.addIssue({
          code: "custom",
          path: ["hosts", i, "simulatorFaults"],
          message: `is for simulated hosts only; host '${h.name}' is ${h.connection.kind}`,
        });
      if (h.connection.kind === "simulated") {
        // Simulated hosts all serve on this machine: one port each.
        const port = h.port ?? c.services.port;
        const other = c.hosts.findIndex(
          (o, j) => j < i && o.connection.kind === "simulated" && (o.port ?? c.services.port) === port,
        );
        if (other >= 0)
          ctx.addIssue({
            code: "custom",
            path: ["hosts", i, "port"],
            message: `port ${port} is also host '${c.hosts[other].name}'s, on the same machine: give each its own hosts[].port`,
          });
      }
      const backend = c.services.attentionBackend;
      if (backend !== undefined && h.gpus.computeCapability !== undefined)
        for (const message of attentionBackendIssues(backend, h.gpus.computeCapability))
          ctx.addIssue({
            code: "custom",
            path: ["services", "attentionBackend"],
            message: `host '${h.name}': ${message}`,
          });
      if (h.gpus.computeCapability !== undefined)
        for (const message of toolkitIssues(c.toolkit.release, h.gpus.computeCapability))
          ctx.addIssue({ code: "custom", path: ["toolkit", "release"], message: `host '${h.name}': ${message}` });
      if (h.gpus.count > 0 && h.gpus.count < c.services.tp) {
        ctx.addIssue({
          code: "custom",
          path: ["services", "tp"],
          message: `tp ${c.services.tp} needs ${c.services.tp} GPUs; host '${h.name}' has ${h.gpus.count}`,
        });
      }
    });
  })
  .superRefine((c, ctx) => routerConfigIssues(c).forEach((i) => ctx.addIssue({ code: "custom", ...i })))
  .superRefine((c, ctx) => {
    const machine = c.operations.driftCheck?.machine;
    const path = ["operations", "driftCheck", "machine"];
    if (machine?.kind === "router" && c.router === undefined)
      ctx.addIssue({ code: "custom", path, message: "is the router's machine, but the stack configures no router" });
    if (machine?.kind === "host" && !c.hosts.some((h) => h.name === machine.name))
      ctx.addIssue({
        code: "custom",
        path: [...path, "name"],
        message: `names no host of \`hosts\` (${machine.name})`,
      });
  })
  .describe("gpuhost stack configuration");

export type GpuhostConfig = z.infer<typeof ConfigSchema>;
export type GpuhostConfigInput = z.input<typeof ConfigSchema>;
export type HostConfig = GpuhostConfig["hosts"][number];
export type { SimulatorConfig } from "../sim-host/config";

export interface ConfigIssue {
  /** The config path as `pulumi config set --path` takes it, with the namespace: gpuhost:hosts[0].connection.port */
  path: string;
  message: string;
}

/**
 * The stack config is invalid: one line naming each config path and what is wrong there, which the
 * engine shows as it is (PlainError: no stack trace, no colour codes).
 */
export class ConfigError extends PlainError {
  constructor(readonly issues: ConfigIssue[]) {
    super(
      `Invalid gpuhost stack configuration: ${issues.map((i) => `${i.path}: ${i.message}`).join("; ")}. Fix it with \`pulumi config set --path <path> <value>\` (or \`pulumi config rm --path <path>\`), or in the stack's Pulumi.<stack>.yaml.`,
    );
    this.name = "ConfigError";
  }
}

export function configPath(parts: ReadonlyArray<PropertyKey>, namespace = CONFIG_NAMESPACE): string {
  let out = "";
  for (const p of parts) out += typeof p === "number" ? `[${p}]` : `${out ? "." : ""}${String(p)}`;
  return `${namespace}:${out || "(root)"}`;
}

/** Validate raw config (top-level keys without namespace); throws ConfigError with config paths. */
export function parseConfig(raw: Record<string, unknown>): GpuhostConfig {
  const result = ConfigSchema.safeParse(raw);
  if (!result.success) {
    throw new ConfigError(
      result.error.issues.flatMap((i) =>
        // One issue per unknown key, at the key's own path: a typo must name itself.
        i.code === "unrecognized_keys"
          ? i.keys.map((k) => ({ path: configPath([...i.path, k]), message: "unknown key" }))
          : [{ path: configPath(i.path), message: i.message }],
      ),
    );
  }
  return result.data;
}

/**
 * The simulated host's folder, absolute: under the project's .gpuhost/ (the schema checks the path
 * as written; this checks it again against `project` with symlinks resolved, so a link inside
 * .gpuhost/ cannot lead out of it). `index` is the host's place in `hosts`, for the error's path.
 */
export function simulatedRoot(host: Pick<HostConfig, "name" | "connection">, project: string, index = 0): string {
  if (host.connection.kind !== "simulated") throw new Error(`host ${host.name} is not simulated`);
  const root = path.resolve(project, host.connection.root ?? path.join(SIM_HOME, "sim-hosts", host.name));
  const home = realPathOfExisting(path.join(project, SIM_HOME));
  if (!underSimHome(root, project) || !realPathOfExisting(root).startsWith(`${home}${path.sep}`)) {
    throw new ConfigError([
      {
        path: configPath(["hosts", index, "connection", "root"]),
        message: `${root} is not a folder under the project's ${SIM_HOME}/ (${path.join(project, SIM_HOME)})`,
      },
    ]);
  }
  return root;
}

/** `p` with symlinks resolved as far as it exists (reading only: nothing is created). */
function realPathOfExisting(p: string): string {
  let existing = p;
  while (!fs.existsSync(existing) && path.dirname(existing) !== existing) existing = path.dirname(existing);
  return path.join(fs.realpathSync(existing), path.relative(existing, p));
}

/** The connection components take: secrets looked up by name (Pulumi secrets in the program). */
export function hostConnection(
  host: Pick<HostConfig, "name" | "connection">,
  projectRoot: string,
  secret: (key: string) => pulumi.Input<string>,
  index = 0,
): HostConnectionInput {
  const c = host.connection;
  switch (c.kind) {
    case "local":
      return c;
    case "simulated":
      return simulatedConnection(simulatedRoot(host, projectRoot, index));
    case "ssh":
      return {
        kind: "ssh",
        host: c.host,
        port: c.port,
        user: c.user,
        hostKey: c.hostKey,
        privateKey: secret(c.privateKeySecret),
        bastion: c.bastion
          ? {
              host: c.bastion.host,
              port: c.bastion.port,
              user: c.bastion.user,
              privateKey: secret(c.bastion.privateKeySecret),
              hostKey: c.bastion.hostKey,
            }
          : undefined,
      };
  }
}

/**
 * The config one host is provisioned with: the stack's, with the host's own port (hosts sharing a
 * machine) and, in a mixed fleet (router.groups), its group's service and served model name.
 */
export function hostConfig(config: GpuhostConfig, host: HostConfig): GpuhostConfig {
  const groups = config.router?.groups;
  const g = groupOf(groups, host.name);
  const inGroup = groups && g ? groups[g] : undefined;
  if (host.port === undefined && !inGroup) return config;
  return {
    ...config,
    services: {
      ...config.services,
      ...(host.port === undefined ? {} : { port: host.port }),
      ...(inGroup ? { active: inGroup.service, servedModelName: inGroup.servedModelName } : {}),
    },
  };
}

/** Top-level keys of the schema, i.e. the Pulumi config keys gpuhost reads. */
export const CONFIG_KEYS = Object.keys(ConfigSchema.shape) as Array<keyof GpuhostConfig>;

export interface LoadedConfig {
  config: GpuhostConfig;
  /** The API key as a Pulumi secret (the plain config holds it too, for validation only: never output it). */
  apiKey?: pulumi.Output<string>;
  /** A secret config value by key name (private keys). */
  secret: (key: string) => pulumi.Output<string>;
}

/** The warnings of the ports the config names (services, each host's own, the router's) inside the ephemeral range. */
export function configuredPortWarnings(config: GpuhostConfig, range?: [number, number]): string[] {
  const ports: [string, number | undefined][] = [
    ["gpuhost:services.port", config.services.port],
    ...config.hosts.map((h, i): [string, number | undefined] => [`gpuhost:hosts[${i}].port`, h.port]),
    ["gpuhost:router.port", config.router?.port],
    ["gpuhost:router.prometheusPort", config.router?.prometheusPort],
  ];
  return ports.flatMap(([where, port]) => {
    const warning = port === undefined ? undefined : ephemeralPortWarning(where, port, range);
    return warning ? [warning] : [];
  });
}

/**
 * Read and validate the stack's `gpuhost:*` config. Unknown keys in the namespace are errors (a typo
 * must not silently fall back to a default). Secrets are read with requireSecret so they stay secret.
 */
export function loadConfig(cfg: pulumi.Config = new pulumi.Config(CONFIG_NAMESPACE)): LoadedConfig {
  const raw: Record<string, unknown> = {};
  const issues: ConfigIssue[] = [];
  const secretKeys = new Set<string>();
  const rawAll = pulumi.runtime.allConfig();
  for (const fullKey of Object.keys(rawAll)) {
    const [ns, key] = fullKey.split(":", 2);
    if (ns !== CONFIG_NAMESPACE || key === undefined) continue;
    if (isConfigSecret(fullKey)) {
      secretKeys.add(key);
      if (key !== "apiKey") continue;
    } else if (key === "apiKey") {
      issues.push({
        path: `${CONFIG_NAMESPACE}:apiKey`,
        message: "must be a secret: pulumi config set --secret apiKey ...",
      });
      continue;
    }
    if (!(CONFIG_KEYS as string[]).includes(key) && !secretKeys.has(key)) {
      issues.push({ path: `${CONFIG_NAMESPACE}:${key}`, message: `unknown key (known: ${CONFIG_KEYS.join(", ")})` });
      continue;
    }
    const value = rawAll[fullKey];
    try {
      raw[key] = key === "apiKey" ? value : JSON.parse(value);
    } catch {
      raw[key] = value;
    }
  }
  if (issues.length) throw new ConfigError(issues);
  const config = parseConfig(raw);
  for (const warning of configuredPortWarnings(config)) void pulumi.log.warn(warning);
  // Before any resource, so before any connection: a real machine's key must not sit under the
  // public passphrase, whoever runs the engine (gpuhost's commands refuse it too: stackAccess).
  const machines = realMachines(config);
  if (machines.length > 0 && usesEmbeddedPassphrase(process.env))
    throw new PlainError(embeddedPassphraseRefusal(pulumi.getStack(), machines));
  return {
    config,
    apiKey: config.apiKey === undefined ? undefined : cfg.requireSecret("apiKey"),
    secret: (key) => cfg.requireSecret(key),
  };
}
