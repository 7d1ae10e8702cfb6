// The `router` config section: SMG (SGLang's router) in front of the stack's hosts. Its owner's
// schema, composed into the one stack schema by components/config.ts. No Pulumi import.
import { z } from "zod";
import { pipIndexUrlSchema } from "../serving-env/schema";
import { PATH_MAX_CHARS, atMostChars } from "../text-bounds";
import { SERVICE_KINDS, ServicesSchema } from "../services/schema";

export const ROUTER_POLICIES = ["cache_aware", "round_robin", "power_of_two", "random", "least_load"] as const;

const port = z.number().int().min(1).max(65535);

const hostName = z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, "must name a host of `hosts`");

/** One class's hosts: the service each runs and the name its class asks for (SMG routes by it). */
const groupSchema = z.object({
  service: z
    .enum(SERVICE_KINDS)
    .describe("The service every host of the group runs (its services.<kind> section must be set)."),
  servedModelName: ServicesSchema.shape.servedModelName
    .unwrap()
    .describe(
      "--served-model-name of the group's hosts: the `model` its class's requests carry, which SMG's model registry routes to the hosts serving it.",
    ),
  hosts: z.array(hostName).min(1).describe("The `hosts` entries of the group."),
});

/** Two classes of traffic behind the one router, each on its own group of hosts (issue 29). */
export const RouterGroupsSchema = z
  .object({
    interactive: groupSchema
      .extend({
        users: z
          .number()
          .int()
          .min(1)
          .max(100_000)
          .describe("Concurrent users, each with one request in flight: the interactive load the fleet must hold."),
        ttftP95Seconds: z.number().positive().describe("The users' objective: time to first token, p95, seconds."),
        itlP95Seconds: z
          .number()
          .positive()
          .describe("The users' objective: inter-token latency per token, p95, seconds ((e2e - TTFT) / (tokens - 1))."),
        requestsPerUser: z
          .number()
          .int()
          .min(1)
          .max(1000)
          .default(4)
          .describe(
            "Requests each user sends in the mixed measurement: its window, in which the batch class is measured too.",
          ),
      })
      .strict()
      .describe("People waiting for answers: judged by TTFT and inter-token latency."),
    batch: groupSchema
      .extend({
        perHostConcurrency: z
          .number()
          .int()
          .min(1)
          .max(4096)
          .optional()
          .describe(
            "Batch requests in flight per host in the mixed measurement; default: the level of the group's service's highest measured throughput on one host.",
          ),
      })
      .strict()
      .describe("The job of `workload` (completions x tokens to its deadline): judged by its throughput."),
  })
  .strict()
  .describe(
    "A mixed fleet: each host runs its group's service under its group's served name, each class's requests reach only its group through SMG's model registry, both classes are measured at once through the router, and the split is planned from the hosts' own measured curves. Every host must be in exactly one group.",
  );
export type RouterGroups = z.infer<typeof RouterGroupsSchema>;
export const GROUP_NAMES = ["interactive", "batch"] as const;
export type GroupName = (typeof GROUP_NAMES)[number];

/** The group HOST belongs to, or undefined. */
export function groupOf(
  groups: Record<GroupName, { hosts: string[] }> | undefined,
  host: string,
): GroupName | undefined {
  return GROUP_NAMES.find((g) => groups?.[g].hosts.includes(host));
}

export const RouterSchema = z
  .object({
    host: z
      .string()
      .regex(/^[a-z0-9][a-z0-9-]{0,62}$/, "must name a host of `hosts`")
      .describe(
        "The `hosts` entry whose machine runs the router (its connection: over SSH, this machine, or simulated).",
      ),
    bind: z
      .union([z.ipv4(), z.literal("localhost")])
      .default("127.0.0.1")
      .describe("Address the router listens on; beyond loopback it needs apiKey (clients must send it)."),
    port: port.default(30100).describe("Port clients send requests to (the fleet's endpoint)."),
    prometheusPort: port.default(29000).describe("Port of SMG's Prometheus metrics (smg_*), bound like `bind`."),
    policy: z
      .enum(ROUTER_POLICIES)
      .default("cache_aware")
      .describe("SMG's load-balancing policy (--policy): cache_aware sends shared prefixes to the same worker."),
    minHealthyHosts: z
      .number()
      .int()
      .positive()
      .optional()
      .describe(
        "Fewest hosts whose gate passed that the fleet may serve from; fewer fails the update. Default: every host.",
      ),
    venvPath: z
      .string()
      .max(PATH_MAX_CHARS, atMostChars(PATH_MAX_CHARS))
      .regex(/^\/[A-Za-z0-9._/-]+$/, "must be an absolute path of letters, digits and ._-/")
      .refine((p) => !p.split("/").includes(".."), "must not contain '..'")
      .default("/opt/gpuhost-router/venv")
      .describe("The router's own venv on its machine (smg, pinned and hash-locked)."),
    pipIndexUrl: pipIndexUrlSchema
      .optional()
      .describe(
        "pip --index-url for smg on the router's machine (a mirror, or file:// for one on that machine); unset: pip's configured default. Every file is still checked against requirements.txt's hashes.",
      ),
    pipExtraIndexUrls: z
      .array(pipIndexUrlSchema)
      .default([])
      .describe("pip --extra-index-url for smg on the router's machine."),
    healthCheck: z
      .object({
        intervalSeconds: z
          .number()
          .int()
          .min(1)
          .max(3600)
          .default(15)
          .describe(
            "Seconds between SMG's probes of each worker (--health-check-interval-secs; SMG's own default, 60 s, leaves a dead host listed healthy for minutes).",
          ),
        timeoutSeconds: z
          .number()
          .int()
          .min(1)
          .max(600)
          .default(25)
          .describe(
            "Timeout of one probe (--health-check-timeout-secs). SGLang's /health waits up to 20 s (SGLANG_HEALTH_CHECK_TIMEOUT) for a token, so a busy host needs more than SMG's default 5 s or it is marked down for being loaded.",
          ),
        failureThreshold: z
          .number()
          .int()
          .min(1)
          .max(100)
          .default(3)
          .describe("Consecutive failed probes before SMG marks a worker unhealthy (--health-failure-threshold)."),
        successThreshold: z
          .number()
          .int()
          .min(1)
          .max(100)
          .default(2)
          .describe("Consecutive good probes before SMG counts a worker healthy again (--health-success-threshold)."),
      })
      .strict()
      .prefault({})
      .describe(
        "How SMG probes its workers: how soon a stopped host shows unhealthy in /workers (and in `gpuhost drift`). SMG stops routing to a worker whose connections fail within seconds whatever these say (README, Fleet).",
      ),
    benchRepeats: z
      .number()
      .int()
      .min(2)
      .max(100)
      .default(3)
      .describe(
        "Runs of each level of the fleet benchmark (at least 2, so the fleet's sustained tok/s carries a 95 % interval); benchmark.repeats wins where larger.",
      ),
    readyDeadlineSeconds: z
      .number()
      .int()
      .positive()
      .max(3600)
      .default(300)
      .describe("How long FleetVerification waits for every registered worker to be healthy in the router."),
    groups: RouterGroupsSchema.optional(),
  })
  .strict()
  .describe(
    "SMG (SGLang's router, PyPI smg) in front of the hosts: only hosts whose gate passed are its workers, and the fleet is verified and measured through it.",
  );

export type RouterConfig = z.infer<typeof RouterSchema>;

/** What the `router` section asks that the rest of the stack cannot give. */
export function routerConfigIssues(c: {
  hosts: Array<{ name: string; connection: { kind: string } }>;
  router?: { host: string; bind: string; minHealthyHosts?: number; groups?: RouterGroups };
  apiKey?: string;
  services: { host: string; active: string; compare: boolean; eagle3?: unknown; dflash?: unknown };
  benchmark?: { rate?: unknown };
}): Array<{ path: PropertyKey[]; message: string }> {
  const r = c.router;
  if (!r) return [];
  const issues: Array<{ path: PropertyKey[]; message: string }> = [];
  if (r.groups) issues.push(...groupIssues(c, r.groups));
  const on = c.hosts.find((h) => h.name === r.host);
  if (!on)
    issues.push({
      path: ["router", "host"],
      message: `names no host (hosts: ${c.hosts.map((h) => h.name).join(", ")})`,
    });
  if (r.minHealthyHosts !== undefined && r.minHealthyHosts > c.hosts.length)
    issues.push({
      path: ["router", "minHealthyHosts"],
      message: `is ${r.minHealthyHosts}, but the stack has ${c.hosts.length} host(s)`,
    });
  if (r.bind !== "127.0.0.1" && r.bind !== "localhost" && c.apiKey === undefined)
    issues.push({
      path: ["apiKey"],
      message: `router.bind ${r.bind} exposes the fleet beyond loopback: set an API key (pulumi config set --secret apiKey ...)`,
    });
  if (on && on.connection.kind === "ssh" && (r.bind === "127.0.0.1" || r.bind === "localhost"))
    issues.push({
      path: ["router", "bind"],
      message: `is loopback, but the router runs on SSH host '${on.name}': FleetVerification reaches it from where \`pulumi up\` runs, so bind 0.0.0.0 (with apiKey)`,
    });
  if (on && on.connection.kind === "ssh") {
    // The router reaches each worker at its serving address: a worker bound to its own loopback is
    // reachable only from its own machine.
    c.hosts.forEach((h, i) => {
      if (h.name === on.name) return;
      if (h.connection.kind !== "ssh")
        issues.push({ path: ["hosts", i], message: `is not reachable from the router's host '${on.name}' (over SSH)` });
      else if (c.services.host === "127.0.0.1" || c.services.host === "localhost")
        issues.push({
          path: ["services", "host"],
          message: `is loopback, so the router on '${on.name}' cannot reach host '${h.name}': bind 0.0.0.0 (with apiKey)`,
        });
    });
  }
  if (on && on.connection.kind !== "ssh")
    c.hosts.forEach((h, i) => {
      if (h.connection.kind === "ssh" && (c.services.host === "127.0.0.1" || c.services.host === "localhost"))
        issues.push({
          path: ["services", "host"],
          message: `is loopback, so the router on '${on.name}' cannot reach host '${h.name}' (hosts[${i}]): bind 0.0.0.0 (with apiKey)`,
        });
    });
  return issues;
}

/** What `router.groups` asks that the stack cannot give: every host in exactly one group, each service configured. */
function groupIssues(
  c: Parameters<typeof routerConfigIssues>[0],
  groups: RouterGroups,
): Array<{ path: PropertyKey[]; message: string }> {
  const issues: Array<{ path: PropertyKey[]; message: string }> = [];
  const names = c.hosts.map((h) => h.name);
  const seen = new Map<string, GroupName>();
  for (const g of GROUP_NAMES) {
    const group = groups[g];
    group.hosts.forEach((h, i) => {
      if (!names.includes(h))
        issues.push({
          path: ["router", "groups", g, "hosts", i],
          message: `names no host (hosts: ${names.join(", ")})`,
        });
      const other = seen.get(h);
      if (other !== undefined)
        issues.push({
          path: ["router", "groups", g, "hosts", i],
          message: `host '${h}' is also in the ${other} group: a host serves one class`,
        });
      seen.set(h, g);
    });
    if (group.service !== "autoregressive" && c.services[group.service] === undefined)
      issues.push({
        path: ["router", "groups", g, "service"],
        message: `is ${group.service}, but services.${group.service} is not set`,
      });
  }
  c.hosts.forEach((h, i) => {
    if (!seen.has(h.name))
      issues.push({ path: ["hosts", i], message: `host '${h.name}' is in no group of router.groups` });
  });
  if (groups.interactive.servedModelName === groups.batch.servedModelName)
    issues.push({
      path: ["router", "groups", "batch", "servedModelName"],
      message: `is the interactive group's too: SMG routes each class by its name, so the two must differ`,
    });
  if (c.benchmark?.rate !== undefined)
    issues.push({
      path: ["benchmark", "rate"],
      message:
        "is an open loop, but a mixed fleet is planned from the hosts' concurrency curves (users per host): use benchmark.concurrency",
    });
  if (c.services.compare || c.services.active === "auto")
    issues.push({
      path: ["services", c.services.compare ? "compare" : "active"],
      message:
        "comparing services on the hosts of a mixed fleet would switch the groups' services: the groups name each host's service (measure the curves with gpuhost compare on one host)",
    });
  return issues;
}
