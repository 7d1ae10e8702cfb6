/**
 * Renders a service's systemd unit from units/sglang.service.tmpl. Every value is escaped for the
 * directive it lands in (systemd-syntax.ts); the template holds the structure and the reasons.
 */
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { projectFile } from "../../project-files";
import { SERVICE_KINDS, type ServiceKind, type ServicesConfig } from "./schema";
import {
  credentialName,
  quoteEnvironmentAssignment,
  renderExecLine,
  unitPath,
  unitText,
  type ExecWord,
} from "./systemd-syntax";

/** The unit file name of a service kind; fixed, so Conflicts= can name units that are not configured. */
export function unitName(kind: ServiceKind): string {
  return `sglang-${kind}.service`;
}

/** Where unit files live on a host (under GPUHOST_ROOT where the connection has a root). */
export const UNIT_DIR = "/etc/systemd/system";

export interface UnitSpec {
  kind: ServiceKind;
  /** The platform the header comment names ("real", or the server program's). */
  platform: string;
  /** Program first; see launch-args.ts. */
  execStart: ExecWord[];
  user: string;
  group: string;
  workingDirectory: string;
  /** Pinned into the unit in this order. */
  environment: Array<[string, string]>;
  /**
   * The API key: a root-only (0600) file on the host, handed to the service as the credential
   * `name` (LoadCredential=); unset when no API key is configured.
   */
  apiKeyCredential?: { name: string; file: string };
  readWritePaths: string[];
  timeoutStartSec: number;
  restart: ServicesConfig["restart"];
  description?: string;
}

const USER_NAME = /^[a-z_][a-z0-9_-]{0,31}$/;

/** The unit template (a real file beside the sources, found from dist/ too). */
export function templatePath(): string {
  return projectFile("components/services/units/sglang.service.tmpl");
}

/** `{{name}}` substitution; a placeholder without a value, or a value without a placeholder, is a bug. */
export function fillTemplate(template: string, values: Record<string, string>): string {
  const used = new Set<string>();
  const out = template.replace(/\{\{([A-Za-z]+)\}\}/g, (_, key: string) => {
    if (!(key in values)) throw new Error(`template placeholder {{${key}}} has no value`);
    used.add(key);
    return values[key];
  });
  const unused = Object.keys(values).filter((k) => !used.has(k));
  if (unused.length) throw new Error(`template has no placeholder for: ${unused.join(", ")}`);
  return out;
}

export function renderUnit(spec: UnitSpec, template = fs.readFileSync(templatePath(), "utf8")): string {
  for (const [field, value] of [
    ["user", spec.user],
    ["group", spec.group],
  ] as const) {
    if (!USER_NAME.test(value))
      throw new Error(`${field} must be a plain system user/group name, got ${JSON.stringify(value)}`);
  }
  if (!/^[a-z][a-z-]*$/.test(spec.platform))
    throw new Error(`platform must be a plain lowercase word, got ${JSON.stringify(spec.platform)}`);
  if (spec.environment.length === 0) throw new Error("a unit needs its pinned environment");
  const others = SERVICE_KINDS.filter((k) => k !== spec.kind).map(unitName);
  return fillTemplate(template, {
    unitName: unitName(spec.kind),
    kind: spec.kind,
    platform: spec.platform,
    description: unitText(spec.description ?? `SGLang ${spec.kind} service (gpuhost)`),
    conflicts: others.join(" "),
    startLimitIntervalSec: String(spec.restart.startLimitIntervalSec),
    startLimitBurst: String(spec.restart.startLimitBurst),
    user: spec.user,
    group: spec.group,
    workingDirectory: unitPath("WorkingDirectory", spec.workingDirectory),
    environment: spec.environment.map(([k, v]) => quoteEnvironmentAssignment(k, v)).join(" "),
    credentialLines: spec.apiKeyCredential
      ? [
          "# The API key: systemd copies this root-only (0600) file into a private credentials folder that",
          "# only User= can read (%d); SGLang reads it with --config, so the key is in no argv or environment.",
          `LoadCredential=${credentialName(spec.apiKeyCredential.name)}:${unitPath("LoadCredential", spec.apiKeyCredential.file)}`,
          "",
        ].join("\n")
      : "",
    execStart: renderExecLine(spec.execStart),
    timeoutStartSec: String(spec.timeoutStartSec),
    restartSec: String(spec.restart.restartSec),
    // "-": a path that does not exist yet must not stop the service from starting.
    readWritePaths: spec.readWritePaths.map((p) => `-${unitPath("ReadWritePaths", p)}`).join(" "),
  });
}

/** sha256 of the rendered unit and the environment it runs with: the restart trigger. */
export function unitHash(content: string, environmentLock: string): string {
  return createHash("sha256").update(content).update("\0").update(environmentLock).digest("hex");
}

/** The environment every unit pins: the toolkit and the keyed JIT cache. */
export function pinnedEnvironment(opts: {
  cudaHome: string;
  venvPath?: string;
  jitCacheDir: string;
}): Array<[string, string]> {
  const binPath = [
    ...(opts.venvPath ? [`${opts.venvPath}/bin`] : []),
    `${opts.cudaHome}/bin`,
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  ].join(":");
  return [
    ["CUDA_HOME", opts.cudaHome],
    ["CUDA_PATH", opts.cudaHome],
    ["PATH", binPath],
    ["LD_LIBRARY_PATH", `${opts.cudaHome}/lib64`],
    ["FLASHINFER_WORKSPACE_BASE", opts.jitCacheDir],
  ];
}
