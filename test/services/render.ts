// Renders the units of a committed stack for tests, with fixed machine-specific paths.
import { parseConfig } from "../../stack/config";
import { jitWorkspace } from "../../components/serving-env/lock";
import { renderServiceUnits, type RenderedUnit } from "../../components/services/serving-service";
import { simulatorProgram } from "../../sim-host/platform";
import { stackConfig } from "../config/stacks";

export const API_KEY = "0123456789abcdef0123456789abcdef";
export const FINGERPRINT = "13.0:cuda-toolkit-13-0=13.0.2-1";

export function unitsOf(
  stack: string,
  opts: { platform?: "real" | "simulated"; extra?: Record<string, unknown>; apiKey?: boolean } = {},
): RenderedUnit[] {
  const apiKey = opts.apiKey ?? stack === "story";
  const c = parseConfig(stackConfig(stack, { ...(apiKey ? { apiKey: API_KEY } : {}), ...opts.extra }));
  const simulated = (opts.platform ?? (stack === "sim" ? "simulated" : "real")) === "simulated";
  return renderServiceUnits({
    services: c.services,
    program: simulated
      ? simulatorProgram(c.simulator, { nodePath: "/usr/bin/node", gpuhostDir: "/srv/gpuhost" })
      : undefined,
    serviceUser: c.environment.serviceUser,
    serviceHome: c.environment.serviceHome,
    venvPath: c.environment.venvPath,
    cudaHome: "/usr/local/cuda-13.0",
    jitWorkspace: jitWorkspace(c.environment, "13.0", FINGERPRINT),
    apiKey,
  });
}
