/**
 * StampKey: 32 random bytes made once per stack and kept only as a Pulumi secret (encrypted in the
 * state). The activation stamp and serviceIdentity depend on the API key so that a rotated key
 * restarts the service; keyed with this secret (HMAC-SHA256), they say nothing about the key to
 * whoever reads the plaintext state or the host's stamp files (a bare sha256 of the key could be
 * guess-checked offline). @pulumi/random would do this, but its provider plugin cannot be installed
 * offline; this dynamic resource is three lines of behaviour.
 */
import * as pulumi from "@pulumi/pulumi";
import { createHmac } from "node:crypto";

/** Serialized into the state: no captured imports, `require` at call time. */
const stampKeyProvider: pulumi.dynamic.ResourceProvider = {
  async create() {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- serialized into the state: modules are required at call time, never captured
    const crypto = require("crypto") as typeof import("crypto");
    return { id: crypto.randomBytes(8).toString("hex"), outs: { key: crypto.randomBytes(32).toString("hex") } };
  },
  // Made once: nothing in the program changes it (replace the resource to draw a new one).
  async diff() {
    return { changes: false };
  },
};

export class StampKey extends pulumi.dynamic.Resource {
  /** 64 hex digits, a secret. */
  public readonly key!: pulumi.Output<string>;

  constructor(name: string, opts?: pulumi.CustomResourceOptions) {
    super(stampKeyProvider, name, { key: undefined }, { ...opts, additionalSecretOutputs: ["key"] });
  }
}

/** HMAC-SHA256 of `value` under the stack's stamp key, hex. */
export function keyedHash(stampKey: string, value: string): string {
  return createHmac("sha256", stampKey).update(value).digest("hex");
}

/**
 * APIKEY's hash keyed with the stack's StampKey (made here, as `${name}-stamp-key` under PARENT), for
 * a stamp that follows the key without saying anything of it; "" (and no StampKey) without a key.
 */
export function keyedApiKeyHash(
  name: string,
  apiKey: pulumi.Input<string> | undefined,
  parent: pulumi.Resource,
): pulumi.Output<string> {
  if (apiKey === undefined) return pulumi.output("");
  const stampKey = new StampKey(`${name}-stamp-key`, { parent });
  return pulumi.all([apiKey, stampKey.key]).apply(([k, sk]) => keyedHash(sk, k));
}
