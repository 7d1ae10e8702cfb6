/**
 * TrustedHostKey's provider methods (trust-on-first-use): loaded when a method runs through
 * components/call-time-provider.ts, never serialized into the state.
 */
import { randomBytes } from "node:crypto";
import { keyWords, presentedKeys, type ProbeHop } from "./probe";

export interface TrustInputs {
  providerVersion: string;
  host: string;
  port: number;
  bastion?: ProbeHop;
  /** The bastion's key to record as well (its own policy is trust-on-first-use). */
  recordBastion: boolean;
}

async function create(inputs: TrustInputs) {
  const seen = await presentedKeys({ host: inputs.host, port: inputs.port }, inputs.bastion);
  if (!seen.target)
    throw new Error(
      `${inputs.host}:${inputs.port}: no host key to trust on first use: the host did not complete a key exchange (${seen.stderr})`,
    );
  // No undefined values: the engine's struct encoding refuses them ("Unexpected struct type").
  const outs: Record<string, unknown> = {
    ...inputs,
    hostKey: keyWords(seen.target),
    recordedAt: new Date().toISOString(),
  };
  if (inputs.recordBastion && seen.bastion) outs.bastionHostKey = keyWords(seen.bastion);
  return { id: randomBytes(8).toString("hex"), outs };
}

// Recorded once. Another host or port is another host: replaced, so its first key is recorded anew.
async function diff(_id: string, olds: TrustInputs, news: TrustInputs) {
  const where = (i: TrustInputs) => JSON.stringify([i.host, i.port, i.bastion?.host, i.bastion?.port]);
  const moved = where(olds) !== where(news);
  return { changes: moved, replaces: moved ? ["host"] : [], deleteBeforeReplace: true };
}

/** What callTimeProvider("dist/components/host-key/provider.js") calls. */
export const provider = { create, diff };
