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

/**
 * The keys the connection's Commands and providers check, per the policies. Throws (through the
 * returned outputs, so `up` and `preview` fail before any step) when a pinned key is missing.
 */
export function trustedHostKeys(name: string, a: TrustArgs, opts: { parent?: pulumi.Resource } = {}): TrustedKeys {
  const b = a.bastion;
  // pulumi.log's promise only says when the engine took the message: nothing waits for it.
  const log = (msg: string, warn = false): void => {
    void (warn ? pulumi.log.warn(msg, opts.parent) : pulumi.log.info(msg, opts.parent));
  };
  const bastionHop = (hostKey?: pulumi.Input<string>) =>
    b
      ? pulumi
          .all([b.privateKey, hostKey])
          .apply(([privateKey, k]) => ({ host: b.host, port: b.port, user: b.user, privateKey, hostKey: k }))
      : undefined;

  let bastionHostKey: pulumi.Output<string> | undefined;
  let tofu: TrustedHostKey | undefined;
  const needsTofu = a.hostKeyPolicy === "trust-on-first-use" && !a.hostKey;
  const bastionTofu = b !== undefined && b.hostKeyPolicy === "trust-on-first-use" && !b.hostKey;
  if (b) {
    if (b.hostKey) bastionHostKey = pulumi.output(keyWords(b.hostKey));
    else if (b.hostKeyPolicy === "pinned")
      bastionHostKey = pulumi.output(
        presentedKeys({ host: b.host, port: b.port }).then((seen) => {
          throw new PlainError(refusal(`${a.configPath}.bastion`, `${b.host}:${b.port}`, seen.target, seen.stderr));
        }),
      );
    else if (b.hostKeyPolicy === "insecure-accept-any")
      bastionHostKey = pulumi.output(
        presentedKeys({ host: b.host, port: b.port }).then((seen) => {
          if (!seen.target)
            throw new PlainError(
              `${a.configPath}.bastion: no answer from ${b.host}:${b.port} (${oneLine(seen.stderr)}).`,
            );
          log(
            `${a.configPath}.bastion.hostKeyPolicy is insecure-accept-any: accepting ${fingerprint(seen.target)} unchecked; anyone between here and ${b.host} can impersonate it`,
            true,
          );
          return keyWords(seen.target);
        }),
      );
  }
  if (needsTofu || bastionTofu) {
    tofu = new TrustedHostKey(
      `${name}-trusted-host-key`,
      { host: a.host, port: a.port, bastion: bastionHop(bastionHostKey), recordBastion: bastionTofu },
      { parent: opts.parent },
    );
    if (bastionTofu) {
      const t = tofu;
      // Checked, and said on every run, as for the target: which bastion key is trusted, and since when.
      bastionHostKey = pulumi.all([t.bastionHostKey, t.recordedAt, t.urn]).apply(async ([k, at, urn]) => {
        if (!k)
          throw new PlainError(
            `${a.configPath}.bastion: trust-on-first-use recorded no key for ${b.host}:${b.port}; replace ${name}-trusted-host-key to record it: pulumi up --replace '${urn}'`,
          );
        const seen = await presentedKeys({ host: b.host, port: b.port });
        if (seen.target && keyWords(seen.target) !== keyWords(k))
          throw new PlainError(
            recordedKeyRefusal({
              configPath: `${a.configPath}.bastion`,
              where: `the bastion ${b.host}:${b.port}`,
              presented: seen.target,
              recorded: k,
              recordedAt: at,
              urn,
            }),
          );
        log(
          `${a.configPath}.bastion: trusting the bastion ${b.host}:${b.port}'s host key ${fingerprint(k)}, recorded on first use at ${at} and enforced since (trust-on-first-use)`,
        );
        return k;
      });
    }
  }

  let hostKey: pulumi.Output<string>;
  if (a.hostKey) hostKey = pulumi.output(keyWords(a.hostKey));
  else if (a.hostKeyPolicy === "trust-on-first-use" && tofu) {
    const t = tofu;
    // Checked here, before any step gets the connection: a swapped key is refused once, in words that
    // say it was recorded on first use (the steps' own checks can only say which key they were given).
    hostKey = pulumi
      .all([t.hostKey, t.recordedAt, t.urn, pulumi.output(bastionHop(bastionHostKey))])
      .apply(async ([k, at, urn, hop]) => {
        const seen = await presentedKeys({ host: a.host, port: a.port }, hop ?? undefined);
        if (seen.target && keyWords(seen.target) !== keyWords(k))
          throw new PlainError(
            recordedKeyRefusal({
              configPath: a.configPath,
              where: `${a.host}:${a.port}`,
              presented: seen.target,
              recorded: k,
              recordedAt: at,
              urn,
            }),
          );
        log(
          `${a.configPath}: trusting ${a.host}'s host key ${fingerprint(k)}, recorded on first use at ${at} and enforced since (trust-on-first-use)`,
        );
        return k;
      });
  } else {
    const via = bastionHop(bastionHostKey);
    hostKey = pulumi.output(via ?? Promise.resolve(undefined)).apply(async (hop) => {
      const seen = await presentedKeys({ host: a.host, port: a.port }, hop ?? undefined);
      if (a.hostKeyPolicy === "pinned")
        throw new PlainError(refusal(a.configPath, `${a.host}:${a.port}`, seen.target, seen.stderr));
      if (!seen.target)
        throw new PlainError(`${a.configPath}: no answer from ${a.host}:${a.port} (${oneLine(seen.stderr)}).`);
      log(
        `${a.configPath}.hostKeyPolicy is insecure-accept-any: accepting ${fingerprint(seen.target)} from ${a.host} unchecked; anyone between here and the host can impersonate it and receive the API key and root`,
        true,
      );
      return keyWords(seen.target);
    });
  }
  return { hostKey, bastionHostKey };
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
