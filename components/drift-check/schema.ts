// The `operations.driftCheck` config section: where and when `gpuhost drift` runs on a schedule
// (a systemd timer). Its owner's schema; stack/config.ts composes it with the stack's own SSH
// connection shape (`machine: { kind: ssh, ... }`), so an operations machine is named exactly as a
// host is. No Pulumi import.
import { z } from "zod";
import { PATH_MAX_CHARS, atMostChars } from "../text-bounds";

/** systemd's OnCalendar= default: once an hour (at minute 0, spread by randomizedDelaySec). */
export const DEFAULT_ON_CALENDAR = "hourly";
/** Debian's prometheus-node-exporter reads its textfile collector from here. */
export const DEFAULT_TEXTFILE_DIR = "/var/lib/prometheus/node-exporter";

/**
 * A calendar expression as systemd.time(7) writes them: letters, digits, `*`, `:`, `-`, `.`, `/`,
 * `~`, `,`, `+` and spaces. Nothing else is part of that grammar, so a newline (a second directive),
 * `%` (a specifier) or a shell metacharacter is refused here rather than escaped.
 */
const CALENDAR = /^[A-Za-z0-9*:.,/~+ -]+$/;

/** An absolute path that reaches an argv word (quoted for systemd) or a script argument (quoted for sh). */
const absolutePath = z
  .string()
  .max(PATH_MAX_CHARS, atMostChars(PATH_MAX_CHARS))
  .refine((p) => p.startsWith("/"), "must be an absolute path")
  .refine((p) => !/[\n\r\0]/.test(p), "must not contain a newline or NUL")
  .refine((p) => !p.split("/").includes(".."), "must not contain '..'");

/**
 * A bare path for LoadCredential= (systemd does not unquote it): restricted, as unitPath()
 * (services/systemd-syntax.ts) checks it again when the unit is rendered.
 */
const barePath = z
  .string()
  .max(PATH_MAX_CHARS, atMostChars(PATH_MAX_CHARS))
  .regex(/^\/[A-Za-z0-9._+@/-]*$/, "must be an absolute path of letters, digits and ._+@-/")
  .refine((p) => !p.split("/").includes(".."), "must not contain '..'");

/** A Pulumi stack name as the CLI takes it: `stack`, `org/stack` or `org/project/stack`. */
export const stackNameSchema = z
  .string()
  .regex(
    /^[A-Za-z0-9_.-]{1,100}(\/[A-Za-z0-9_.-]{1,100}){0,2}$/,
    "must be a Pulumi stack name (letters, digits, '_', '.', '-'; optionally org/ or org/project/ before it)",
  );

/** The machine forms other than SSH; stack/config.ts adds the host layer's SSH connection. */
export const localMachineSchema = z
  .object({ kind: z.literal("local") })
  .strict()
  .describe("This machine.");
export const routerMachineSchema = z
  .object({ kind: z.literal("router") })
  .strict()
  .describe("The machine of the `hosts` entry that `router.host` names.");
export const hostMachineSchema = z
  .object({
    kind: z.literal("host"),
    name: z
      .string()
      .regex(/^[a-z0-9][a-z0-9-]{0,62}$/, "must name a host of `hosts`")
      .describe("The `hosts` entry whose machine runs the check (a simulated host: rendered into its folder)."),
  })
  .strict()
  .describe("The machine of one `hosts` entry.");

/** The section's fields other than `machine` (whose SSH form is the stack's). */
export const driftCheckFields = {
  stack: stackNameSchema
    .optional()
    .describe("The stack the check runs on; default the stack being deployed (`pulumi stack`)."),
  onCalendar: z
    .string()
    .min(1, "must not be empty")
    .max(256, "must be at most 256 characters")
    .regex(CALENDAR, "must be a systemd calendar expression (letters, digits, spaces and *:.,/~+-), e.g. hourly")
    .default(DEFAULT_ON_CALENDAR)
    .describe("When the timer runs the check (systemd OnCalendar=, systemd.time(7)): hourly, *:0/15, Mon *-*-* 06:00."),
  randomizedDelaySec: z
    .number()
    .int()
    .min(0)
    .max(86_400)
    .default(300)
    .describe(
      "Random delay added to each run (RandomizedDelaySec=), so machines sharing a backend do not all refresh at once.",
    ),
  persistent: z
    .boolean()
    .default(true)
    .describe("Persistent=: a run missed while the machine was off happens at the next boot."),
  timeoutSec: z
    .number()
    .int()
    .min(10)
    .max(86_400)
    .default(900)
    .describe(
      "TimeoutStartSec= of the check's service: systemd stops a check that runs longer (it then writes no file; the stale timestamp shows it).",
    ),
  textfileDir: absolutePath
    .default(DEFAULT_TEXTFILE_DIR)
    .describe(
      "Where the check writes gpuhost-drift-<stack>.prom for node_exporter's textfile collector (created if missing).",
    ),
  projectDir: absolutePath
    .optional()
    .describe(
      "The gpuhost project (built: dist/, and its engine set up) on that machine; default this project's folder.",
    ),
  nodePath: absolutePath
    .optional()
    .describe("Node.js (>= 22) on that machine that runs the CLI; default the node running `pulumi up`."),
  user: z
    .string()
    .regex(/^[a-z_][a-z0-9_-]{0,31}$/, "must be a plain system user name")
    .optional()
    .describe(
      "The user the check runs as (it must be able to read the stack's backend); default the user running `pulumi up`.",
    ),
  backendUrl: z
    .string()
    .max(2048)
    .regex(/^(file|s3|gs|azblob):\/\/[^\s@]*$/, "must be a file://, s3://, gs:// or azblob:// URL without credentials")
    .optional()
    .describe(
      "PULUMI_BACKEND_URL of the check; unset: the backend the user is logged in to (embedded stacks: the project's own).",
    ),
  passphraseFile: barePath
    .optional()
    .describe(
      "Root-only (0600) file on that machine holding the stack's passphrase; handed to the check as a systemd credential (PULUMI_CONFIG_PASSPHRASE_FILE). Embedded stacks need none.",
    ),
};

/** The section, given the stack's SSH connection schema for `machine: { kind: ssh, ... }`. */
export function driftCheckSchema<S extends z.ZodObject>(sshMachine: S) {
  return z
    .object({
      machine: z
        .discriminatedUnion("kind", [localMachineSchema, routerMachineSchema, hostMachineSchema, sshMachine], {
          error:
            "must be { kind: local }, { kind: router }, { kind: host, name: <hosts[].name> } or an SSH connection { kind: ssh, host, ... }",
        })
        .describe(
          "Where the timer runs (kind: local | router | host | ssh): this machine, the router's, a host's, or an operations machine over SSH.",
        ),
      ...driftCheckFields,
    })
    .strict()
    .describe(
      "`gpuhost drift --textfile` on a schedule: a systemd timer and service on the machine named (components/drift-check).",
    );
}

/** The section without `machine`: what the rendering and the component take. */
export type DriftCheckSettings = z.infer<z.ZodObject<typeof driftCheckFields>>;
