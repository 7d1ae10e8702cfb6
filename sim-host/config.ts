// The simulated platform's sections of the stack config: a host whose connection is a folder of the
// project (`kind: simulated`) and the simulator that serves on it (`simulator`). The program's config
// (stack/config.ts) composes them with the components' sections; no component reads them.
import * as path from "node:path";
import { z } from "zod";
import { projectRoot } from "../project-files";
import { faultNameSchema } from "../simulator/faults";
import { NAME_MAX_CHARS, PATH_MAX_CHARS, atMostChars } from "../components/text-bounds";

/**
 * The folder every simulated host lives in: the project's own .gpuhost/. A simulated host writes its
 * packages, units and users under its root, so a root elsewhere (`/..`, /var, a home) would let a
 * stack file write outside the project.
 */
export const SIM_HOME = ".gpuhost";

/** Whether `root` (relative to `project`, or absolute) names a folder strictly inside project/.gpuhost. */
export function underSimHome(root: string, project: string): boolean {
  const home = path.join(project, SIM_HOME);
  return path.resolve(project, root).startsWith(`${home}${path.sep}`);
}

export const simulatedConnectionConfig = z
  .object({
    kind: z.literal("simulated"),
    root: z
      .string()
      .max(PATH_MAX_CHARS, atMostChars(PATH_MAX_CHARS))
      .regex(/^[A-Za-z0-9._+@/-]+$/, "must be a folder path of letters, digits and ._+@-/")
      .refine((p) => !p.split("/").includes(".."), "must not contain '..'")
      .refine(
        (p) => underSimHome(p, projectRoot()),
        `must be a folder under the project's ${SIM_HOME}/ (e.g. ${SIM_HOME}/sim-hosts/a), relative to the project or absolute`,
      )
      .optional()
      .describe(
        `Folder standing for /: a folder under the project's ${SIM_HOME}/ (relative paths are relative to the project); default ${SIM_HOME}/sim-hosts/<host name>.`,
      ),
  })
  .strict()
  .describe("The simulated platform: a folder of the project stands for /, the simulator serves.");

/** A simulator profile: the name of a file, simulator/profiles/<name>.yaml. */
const profileName = z
  .string()
  .max(NAME_MAX_CHARS, atMostChars(NAME_MAX_CHARS))
  .regex(/^[A-Za-z0-9._-]+$/, "must be a profile name (simulator/profiles/<name>.yaml)");

export const SimulatorSchema = z
  .object({
    profile: profileName
      .default("tiny")
      .describe("Simulator profile (simulator/profiles/<name>.yaml) served on simulated hosts."),
    serviceProfiles: z
      .object({
        autoregressive: profileName.optional().describe("Profile of the autoregressive unit; default: profile."),
        eagle3: profileName.optional().describe("Profile of the EAGLE-3 unit; default: profile."),
        dflash: profileName.optional().describe("Profile of the DFlash unit; default: profile."),
      })
      .strict()
      .default({})
      .describe(
        "Per-service profile overrides (e.g. eagle3: kimi-k2.6-8x-rtx-pro-6000-eagle3), so each simulated unit shows its own speculative behaviour.",
      ),
    faults: z
      .array(faultNameSchema)
      .default([])
      .describe("Simulator faults to inject (listed by `gpuhost sim --list`)."),
    timeScale: z
      .number()
      .positive()
      .max(10000)
      .default(1)
      .describe("Simulated seconds per real second (e.g. 60: a 10-minute load takes 10 s)."),
    loadSeconds: z
      .number()
      .nonnegative()
      .max(86400)
      .optional()
      .describe(
        "Every model load takes this many simulated seconds instead of the profile's range (its serving behaviour unchanged): a rehearsal or test that proves the gate and the fleet, not the wait for a load.",
      ),
  })
  .strict()
  .describe("The SGLang simulator that serves on simulated hosts (ignored on real hosts).");

/** The simulator's settings, as the stack config holds them. */
export type SimulatorConfig = z.infer<typeof SimulatorSchema>;
