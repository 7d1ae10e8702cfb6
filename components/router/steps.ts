// The Router's host steps as plain values (pure, no Pulumi): which script runs with which arguments
// and standard input. The component turns each into a hostScript; the test-host suite
// (test/testhost/router.test.ts) runs the very same steps over SSH with execOnHost, so what real
// systemd is shown is what `pulumi up` installs, not a copy of it.
import { createHash } from "node:crypto";
import {
  launcherText,
  renderRouterUnit,
  requirementsText,
  ROUTER_KEY_FILE,
  routerIdentity,
  routerLaunchConfig,
} from "./render";
import type { RouterConfig } from "./schema";
import type { HostConnection } from "../host/connection";

const SCRIPTS = "components/router/scripts";
export const INSTALL_ROUTER_SCRIPT = `${SCRIPTS}/install-router.sh`;
export const CONFIGURE_ROUTER_SCRIPT = `${SCRIPTS}/configure-router.sh`;
/** Read-only: what FleetVerification's refresh probes on the router's machine. */
export const PROBE_ROUTER_SCRIPT = `${SCRIPTS}/probe-router.sh`;
const SERVICE_SCRIPTS = "components/services/scripts";

export interface RouterStep {
  /** Path of the .sh file, relative to the project root. */
  script: string;
  args: string[];
  deleteScript?: string;
  deleteArgs?: string[];
}

const b64 = (s: string) => Buffer.from(s).toString("base64");

/** install-router.sh: smg into its venv (pinned, --require-hashes) and the launcher beside it. */
export function installStep(
  router: Pick<RouterConfig, "venvPath"> & Partial<Pick<RouterConfig, "pipIndexUrl" | "pipExtraIndexUrls">>,
): RouterStep {
  return {
    script: INSTALL_ROUTER_SCRIPT,
    args: [
      router.venvPath,
      b64(requirementsText()),
      b64(launcherText()),
      ...(router.pipIndexUrl ? ["--index-url", router.pipIndexUrl] : []),
      ...(router.pipExtraIndexUrls ?? []).flatMap((u) => ["--extra-index-url", u]),
    ],
  };
}

/** The key file the unit's LoadCredential= reads (root-only 0600), written from the key on standard input. */
export function keyFileStep(): RouterStep {
  return {
    script: `${SERVICE_SCRIPTS}/api-key-file.sh`,
    args: [ROUTER_KEY_FILE],
    deleteScript: `${SERVICE_SCRIPTS}/remove-api-key-file.sh`,
    deleteArgs: [ROUTER_KEY_FILE],
  };
}

/** keyFileStep's standard input: the key goes there, never into an argument (`ps` shows those to every user). */
export function keyFileStdin(apiKey: string): string {
  return `${apiKey}\n`;
}

/**
 * configure-router.sh: the unit, the launcher's config with these workers, and the stamp that
 * restarts the router when any of them (or the key, through its keyed hash: "" without a key) changed.
 */
export function configureStep(
  router: RouterConfig,
  workerUrls: readonly string[],
  key: { apiKey: boolean; keyHash: string },
): RouterStep & { identity: string } {
  const unit = renderRouterUnit(router, { apiKey: key.apiKey });
  const launch = routerLaunchConfig(router, workerUrls);
  const identity = routerIdentity(unit, launch);
  const stamp = createHash("sha256").update(`${identity}\0${key.keyHash}`).digest("hex");
  return {
    script: CONFIGURE_ROUTER_SCRIPT,
    args: [b64(unit), b64(`${JSON.stringify(launch, null, 2)}\n`), stamp],
    deleteScript: `${SCRIPTS}/remove-router.sh`,
    identity,
  };
}

/** What the Router wrote on its machine, and how it wrote it (stored as a secret: the connection). */
export interface RouterHostCheck {
  connection: HostConnection;
  venvPath: string;
  /** sha256 of the rendered unit and of the launcher config the configure step installs. */
  unitSha256: string;
  configSha256: string;
  /** install-router.sh's and configure-router.sh's arguments exactly as the Router's steps run them. */
  installArgs: string[];
  configureArgs: string[];
}

/**
 * What the install and configure steps leave on the router's machine, and their exact arguments:
 * FleetVerification probes the machine against it on refresh and runs the steps again to repair it
 * (components/fleet-verification/router-host.ts).
 */
export function hostCheck(
  router: Parameters<typeof installStep>[0],
  configure: RouterStep,
): Omit<RouterHostCheck, "connection"> {
  const sha256 = (base64: string) => createHash("sha256").update(Buffer.from(base64, "base64")).digest("hex");
  return {
    venvPath: router.venvPath,
    unitSha256: sha256(configure.args[0]),
    configSha256: sha256(configure.args[1]),
    installArgs: installStep(router).args,
    configureArgs: configure.args,
  };
}
