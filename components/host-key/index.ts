/**
 * Which SSH host keys gpuhost trusts (issue #12.2). A host is checked against a key on every
 * connection; where that key comes from is the `hostKeyPolicy` of the connection (and of its bastion):
 *   - pinned (default): `hostKey` must be set; unset, `up` refuses before anything runs on the host,
 *     showing the key and fingerprint the host presented so it can be pinned after checking it;
 *   - trust-on-first-use: the first key seen is recorded in the state (TrustedHostKey) and enforced on
 *     every later run; `up` says which key it trusts and since when;
 *   - insecure-accept-any: whatever key the host presents is taken, with a warning on every run.
 * Commands and dynamic providers then always get a key and check it strictly.
 */
import * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import { callTimeProvider } from "../call-time-provider";
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

const refusal = (configPath: string, key: string | undefined, stderr: string) =>
  key
    ? `${configPath}.hostKey is unset and hostKeyPolicy is pinned: refusing to run anything on a host that cannot be told from an impostor. It presented ${key.split(" ")[0]} ${fingerprint(key)}; if that is your host's key (check on the host: ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub), pin it: ${configPath}.hostKey = "${keyWords(key)}" (or choose hostKeyPolicy trust-on-first-use)`
    : `${configPath}.hostKey is unset and hostKeyPolicy is pinned, and the host could not be asked for its key (${stderr || "no answer"})`;

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
          throw new Error(refusal(`${a.configPath}.bastion`, seen.target, seen.stderr));
        }),
      );
    else if (b.hostKeyPolicy === "insecure-accept-any")
      bastionHostKey = pulumi.output(
        presentedKeys({ host: b.host, port: b.port }).then((seen) => {
          if (!seen.target) throw new Error(`${a.configPath}.bastion: no answer (${seen.stderr})`);
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
      // Said on every run, as for the target: which bastion key is trusted, and since when.
      bastionHostKey = pulumi.all([t.bastionHostKey, t.recordedAt]).apply(([k, at]) => {
        if (!k)
          throw new Error(
            `${a.configPath}.bastion: trust-on-first-use recorded no key for ${b.host}:${b.port}; replace ${name}-trusted-host-key (pulumi up --replace) to record it`,
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
    hostKey = pulumi.all([t.hostKey, t.recordedAt]).apply(([k, at]) => {
      log(
        `${a.configPath}: trusting ${a.host}'s host key ${fingerprint(k)}, recorded on first use at ${at} and enforced since (trust-on-first-use)`,
      );
      return k;
    });
  } else {
    const via = bastionHop(bastionHostKey);
    hostKey = pulumi.output(via ?? Promise.resolve(undefined)).apply(async (hop) => {
      const seen = await presentedKeys({ host: a.host, port: a.port }, hop ?? undefined);
      if (a.hostKeyPolicy === "pinned") throw new Error(refusal(a.configPath, seen.target, seen.stderr));
      if (!seen.target) throw new Error(`${a.configPath}: no answer from ${a.host}:${a.port} (${seen.stderr})`);
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
    bastion?: {
      host: string;
      port: number;
      user: string;
      privateKey: pulumi.Input<string>;
      hostKey?: pulumi.Input<string>;
    };
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
