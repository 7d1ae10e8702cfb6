// What the Router component writes on its machine, rendered as plain text (pure, unit-tested): the
// hardened gpuhost-router.service from units/gpuhost-router.service.tmpl, the launcher's JSON config
// (every smg flag but the key), and each worker's URL as the router reaches it.
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { projectFile } from "../../project-files";
import { fillTemplate } from "../services/unit";
import { credentialName, renderExecLine, unitPath } from "../services/systemd-syntax";
import type { RouterConfig } from "./schema";

export const ROUTER_UNIT = "gpuhost-router.service";
/** The smg release requirements.txt pins (and hash-locks). */
export const SMG_VERSION = "1.13.0";
/** The credential id the launcher reads the key from ($CREDENTIALS_DIRECTORY/router-api-key). */
export const ROUTER_KEY_CREDENTIAL = "router-api-key";
/** Root-only (0600) file on the router's machine holding `api-key: "..."` (services/scripts/api-key-file.sh). */
export const ROUTER_KEY_FILE = "/etc/gpuhost/router-api-key.yaml";
export const ROUTER_CONFIG_FILE = "/etc/gpuhost-router/router.json";

/** The router's home beside its venv: the launcher and the requirements it was installed from. */
export function routerHome(venvPath: string): string {
  return venvPath.replace(/\/[^/]+\/?$/, "") || "/";
}

export function requirementsText(): string {
  return fs.readFileSync(projectFile("components/router/requirements.txt"), "utf8");
}

export function launcherText(): string {
  return fs.readFileSync(projectFile("components/router/launcher.py"), "utf8");
}

export function renderRouterUnit(
  router: Pick<RouterConfig, "venvPath">,
  opts: { apiKey: boolean },
  template = fs.readFileSync(projectFile("components/router/units/gpuhost-router.service.tmpl"), "utf8"),
): string {
  const venv = unitPath("venvPath", router.venvPath);
  return fillTemplate(template, {
    smgVersion: SMG_VERSION,
    credentialLines: opts.apiKey
      ? `LoadCredential=${credentialName(ROUTER_KEY_CREDENTIAL)}:${unitPath("LoadCredential", ROUTER_KEY_FILE)}\n`
      : "",
    execStart: renderExecLine([`${venv}/bin/python`, `${routerHome(venv)}/launcher.py`, ROUTER_CONFIG_FILE]),
  });
}

/** The launcher's config: `smg launch` flags without the key, workers in a stable order. */
export function routerLaunchConfig(router: RouterConfig, workerUrls: readonly string[]): Record<string, unknown> {
  return {
    host: router.bind,
    port: router.port,
    "worker-urls": [...workerUrls].sort(),
    policy: router.policy,
    "prometheus-host": router.bind,
    "prometheus-port": router.prometheusPort,
    // Workers are registered by the stack once their gate passed: SMG's own startup wait is short.
    "worker-startup-timeout-secs": 120,
    "health-check-interval-secs": router.healthCheck.intervalSeconds,
    "health-check-timeout-secs": router.healthCheck.timeoutSeconds,
    "health-failure-threshold": router.healthCheck.failureThreshold,
    "health-success-threshold": router.healthCheck.successThreshold,
    "log-level": "info",
  };
}

/** Hash of what the router runs with: a change restarts it (and re-verifies the fleet). */
export function routerIdentity(unit: string, launchConfig: Record<string, unknown>): string {
  return createHash("sha256")
    .update(unit)
    .update("\0")
    .update(JSON.stringify(launchConfig))
    .update("\0")
    .update(requirementsText())
    .update("\0")
    .update(launcherText())
    .digest("hex");
}
