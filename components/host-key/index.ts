/**
 * Which SSH host keys gpuhost trusts (issue #12.2). A host is checked against a key on every
 * connection; where that key comes from is the `hostKeyPolicy` of the connection (and of its bastion):
 *   - pinned (default): `hostKey` must be set; unset, `up` refuses before anything runs on the host,
 *     showing the key and fingerprint the host presented so it can be pinned after checking it;
 *   - trust-on-first-use: the first key seen is recorded in the state (TrustedHostKey) and enforced on
 *     every later run; `up` says which key it trusts and since when. The program itself compares the
 *     key presented with the record before any step gets the connection, so a swapped key is refused
 *     once, saying it was the recorded key (the steps' checks only know the key they were given);
 *   - insecure-accept-any: whatever key the host presents is taken, with a warning on every run.
 * Commands and dynamic providers then always get a key and check it strictly.
 */
import * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import { callTimeProvider } from "../call-time-provider";
import type { BastionInput } from "../host/script";
import { PlainError } from "../plain-error";
import { fingerprint, keyWords, presentedKeys, type ProbeHop } from "./probe";

export const HOST_KEY_POLICIES = ["pinned", "trust-on-first-use", "insecure-accept-any"] as const;
export type HostKeyPolicy = (typeof HOST_KEY_POLICIES)[number];

export const hostKeyPolicySchema = z
  .enum(HOST_KEY_POLICIES)
  .default("pinned")
  .describe(
    "How the host key is checked: pinned (hostKey required; unset, up refuses and prints the key the host presents), trust-on-first-use (the first key seen is recorded in the state and enforced afterwards), insecure-accept-any (no check, warned on every run).",
  );

/** Bump when the provider's behaviour changes. */
export const PROVIDER_VERSION = "2";

// The state holds only call-time-provider's object: the implementation (./provider.ts) is found
// when a method runs, so no checkout path is stored.
const trustProvider = callTimeProvider("dist/components/host-key/provider.js");

export class TrustedHostKey extends pulumi.dynamic.Resource {
  declare public readonly hostKey: pulumi.Output<string>;
  declare public readonly bastionHostKey: pulumi.Output<string | undefined>;
  declare public readonly recordedAt: pulumi.Output<string>;

  constructor(
    name: string,
    args: { host: string; port: number; bastion?: pulumi.Input<ProbeHop>; recordBastion: boolean },
    opts?: pulumi.CustomResourceOptions,
  ) {
    super(
      trustProvider,
      name,
      {
        providerVersion: PROVIDER_VERSION,
        host: args.host,
        port: args.port,
        bastion: args.bastion ? pulumi.secret(args.bastion) : undefined,
        recordBastion: args.recordBastion,
        hostKey: undefined,
        bastionHostKey: undefined,
        recordedAt: undefined,
      },
      opts,
    );
  }
}

export interface TrustArgs {
  host: string;
  port: number;
  user: string;
  hostKey?: string;
  hostKeyPolicy: HostKeyPolicy;
  bastion?: {
    host: string;
    port: number;
    user: string;
    privateKey: pulumi.Input<string>;
    hostKey?: string;
    hostKeyPolicy: HostKeyPolicy;
  };
  /** The connection's path in the stack config, for messages: `gpuhost:hosts[0].connection`. */
  configPath: string;
}

export interface TrustedKeys {
  hostKey: pulumi.Output<string>;
  bastionHostKey?: pulumi.Output<string>;
}

/** What to run on the host to see its key, for a person to compare with what it presented. */
const CHECK_ON_HOST = "check it on the host: ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub";

const shown = (key: string) => `${key.split(" ")[0]} ${fingerprint(key)}`;

const refusal = (configPath: string, where: string, key: string | undefined, stderr: string) =>
  key
    ? `${configPath}.hostKey is unset and hostKeyPolicy is pinned: refusing to run anything on ${where}, which cannot be told from an impostor. It presented ${shown(key)}; if that is your host's key (${CHECK_ON_HOST}), pin it: ${configPath}.hostKey = "${keyWords(key)}" (pulumi config set --path '${configPath}.hostKey' '${keyWords(key)}'), or choose hostKeyPolicy trust-on-first-use.`
    : `${configPath}.hostKey is unset and hostKeyPolicy is pinned, and ${where} could not be asked for its key (${oneLine(stderr) || "no answer"}): nothing was run on it.`;

/** ssh's error output as one line (it may hold several). */
const oneLine = (text: string) => text.replace(/\s*\n\s*/g, "; ").trim();

/**
 * Under trust-on-first-use, the host presented a key other than the one recorded: what was found,
 * what was recorded (when, by which resource), and the command that accepts the new key.
 */
export function recordedKeyRefusal(r: {
  configPath: string;
  where: string;
  presented: string;
  recorded: string;
  recordedAt: string;
  urn: string;
}): string {
  return `${r.configPath}: ${r.where} presented ${shown(r.presented)}, but the key trust-on-first-use recorded for it at ${r.recordedAt} (resource ${r.urn.split("::").at(-1)}) is ${shown(r.recorded)}: refused, nothing was run on it. If the host's key really changed (${CHECK_ON_HOST}), accept the new one with: pulumi up --replace '${r.urn}'`;
}

type Log = (msg: string, warn?: boolean) => void;
type Bastion = NonNullable<TrustArgs["bastion"]>;

/**
 * The keys the connection's Commands and providers check, per the policies. Throws (through the
 * returned outputs, so `up` and `preview` fail before any step) when a pinned key is missing.
 */
export function trustedHostKeys(name: string, a: TrustArgs, opts: { parent?: pulumi.Resource } = {}): TrustedKeys {
  const b = a.bastion;
  // pulumi.log's promise only says when the engine took the message: nothing waits for it.
  const log: Log = (msg, warn = false) => {
    void (warn ? pulumi.log.warn(msg, opts.parent) : pulumi.log.info(msg, opts.parent));
  };
  let bastionHostKey = b && untrackedBastionKey(a.configPath, b, log);
  let tofu: TrustedHostKey | undefined;
  const needsTofu = a.hostKeyPolicy === "trust-on-first-use" && !a.hostKey;
  const bastionTofu = b !== undefined && b.hostKeyPolicy === "trust-on-first-use" && !b.hostKey;
  if (needsTofu || bastionTofu) {
    tofu = new TrustedHostKey(
      `${name}-trusted-host-key`,
      { host: a.host, port: a.port, bastion: bastionHop(b, bastionHostKey), recordBastion: bastionTofu },
      { parent: opts.parent },
    );
    if (bastionTofu) bastionHostKey = recordedBastionKey(name, a.configPath, b, tofu, log);
  }
  const hop = () => bastionHop(b, bastionHostKey);
  return { hostKey: targetHostKey(a, tofu, hop, log), bastionHostKey };
}

/** The hop a probe of the target goes through: the bastion with its key, when there is one. */
function bastionHop(b: Bastion | undefined, hostKey?: pulumi.Input<string>) {
  return b
    ? pulumi
        .all([b.privateKey, hostKey])
        .apply(([privateKey, k]) => ({ host: b.host, port: b.port, user: b.user, privateKey, hostKey: k }))
    : undefined;
}

/** The bastion's key where no record decides it: pinned in the config, refused unpinned, or taken as presented. */
function untrackedBastionKey(configPath: string, b: Bastion, log: Log): pulumi.Output<string> | undefined {
  if (b.hostKey) return pulumi.output(keyWords(b.hostKey));
  if (b.hostKeyPolicy === "trust-on-first-use") return undefined;
  return pulumi.output(
    presentedKey(
      { configPath: `${configPath}.bastion`, host: b.host, port: b.port },
      b.hostKeyPolicy === "pinned",
      undefined,
      (fp) =>
        `${configPath}.bastion.hostKeyPolicy is insecure-accept-any: accepting ${fp} unchecked; anyone between here and ${b.host} can impersonate it`,
      log,
    ),
  );
}

/** Checked, and said on every run, as for the target: which bastion key is trusted, and since when. */
function recordedBastionKey(
  name: string,
  configPath: string,
  b: Bastion,
  t: TrustedHostKey,
  log: Log,
): pulumi.Output<string> {
  return pulumi.all([t.bastionHostKey, t.recordedAt, t.urn]).apply(async ([k, at, urn]) => {
    if (!k)
      throw new PlainError(
        `${configPath}.bastion: trust-on-first-use recorded no key for ${b.host}:${b.port}; replace ${name}-trusted-host-key to record it: pulumi up --replace '${urn}'`,
      );
    const where = `the bastion ${b.host}:${b.port}`;
    const bastion = { configPath: `${configPath}.bastion`, where, what: where, host: b.host, port: b.port };
    return checkedRecord(bastion, { recorded: k, recordedAt: at, urn }, undefined, log);
  });
}

/** The target's key: pinned in the config, its record checked against what it presents, or what it presents. */
function targetHostKey(
  a: TrustArgs,
  tofu: TrustedHostKey | undefined,
  hop: () => ReturnType<typeof bastionHop>,
  log: Log,
): pulumi.Output<string> {
  if (a.hostKey) return pulumi.output(keyWords(a.hostKey));
  const target = { configPath: a.configPath, host: a.host, port: a.port };
  if (a.hostKeyPolicy === "trust-on-first-use" && tofu) {
    const t = tofu;
    // Checked here, before any step gets the connection: a swapped key is refused once, in words that
    // say it was recorded on first use (the steps' own checks can only say which key they were given).
    return pulumi
      .all([t.hostKey, t.recordedAt, t.urn, pulumi.output(hop())])
      .apply(async ([k, at, urn, via]) =>
        checkedRecord(
          { ...target, where: `${a.host}:${a.port}`, what: a.host },
          { recorded: k, recordedAt: at, urn },
          via ?? undefined,
          log,
        ),
      );
  }
  const via = hop();
  return pulumi
    .output(via ?? Promise.resolve(undefined))
    .apply(async (h) =>
      presentedKey(
        target,
        a.hostKeyPolicy === "pinned",
        h ?? undefined,
        (fp) =>
          `${a.configPath}.hostKeyPolicy is insecure-accept-any: accepting ${fp} from ${a.host} unchecked; anyone between here and the host can impersonate it and receive the API key and root`,
        log,
      ),
    );
}

/**
 * Without a key to check against: under pinned, refused (showing what was presented, to pin it);
 * under insecure-accept-any, what was presented, with WARNING said on every run.
 */
async function presentedKey(
  t: { configPath: string; host: string; port: number },
  pinned: boolean,
  hop: ProbeHop | undefined,
  warning: (fingerprint: string) => string,
  log: Log,
): Promise<string> {
  const seen = await presentedKeys({ host: t.host, port: t.port }, hop);
  if (pinned) throw new PlainError(refusal(t.configPath, `${t.host}:${t.port}`, seen.target, seen.stderr));
  if (!seen.target)
    throw new PlainError(`${t.configPath}: no answer from ${t.host}:${t.port} (${oneLine(seen.stderr)}).`);
  log(warning(fingerprint(seen.target)), true);
  return keyWords(seen.target);
}

/** The key trust-on-first-use recorded, refused when the host now presents another; said on every run. */
async function checkedRecord(
  t: { configPath: string; where: string; what: string; host: string; port: number },
  r: { recorded: string; recordedAt: string; urn: string },
  hop: ProbeHop | undefined,
  log: Log,
): Promise<string> {
  const seen = await presentedKeys({ host: t.host, port: t.port }, hop);
  if (seen.target && keyWords(seen.target) !== keyWords(r.recorded))
    throw new PlainError(
      recordedKeyRefusal({ configPath: t.configPath, where: t.where, presented: seen.target, ...r }),
    );
  log(
    `${t.configPath}: trusting ${t.what}'s host key ${fingerprint(r.recorded)}, recorded on first use at ${r.recordedAt} and enforced since (trust-on-first-use)`,
  );
  return r.recorded;
}

/**
 * The connection with the keys its Commands and providers check filled in per the policies of the
 * config (`cfg`): what index.ts hands the host's components.
 */
export function trustConnection<
  C extends {
    host: string;
    port: number;
    user: string;
    hostKey?: pulumi.Input<string>;
    bastion?: BastionInput;
  },
>(
  name: string,
  conn: C,
  cfg: {
    hostKey?: string;
    hostKeyPolicy: HostKeyPolicy;
    bastion?: { hostKey?: string; hostKeyPolicy: HostKeyPolicy };
  },
  configPath: string,
): C {
  const keys = trustedHostKeys(name, {
    host: conn.host,
    port: conn.port,
    user: conn.user,
    hostKey: cfg.hostKey,
    hostKeyPolicy: cfg.hostKeyPolicy,
    bastion:
      conn.bastion && cfg.bastion
        ? { ...conn.bastion, hostKey: cfg.bastion.hostKey, hostKeyPolicy: cfg.bastion.hostKeyPolicy }
        : undefined,
    configPath,
  });
  return {
    ...conn,
    hostKey: keys.hostKey,
    bastion: conn.bastion ? { ...conn.bastion, hostKey: keys.bastionHostKey } : undefined,
  };
}
