/**
 * What gpuhost's dynamic-provider implementations share (VerifiedGeneration, ServiceComparison):
 * the process guard when hosted by the engine, picking a state's inputs or measurements apart,
 * order-independent comparison, and the diff built from it. Loaded normally by the implementations, never serialized (the
 * state holds only components/call-time-provider.ts's object).
 */
import { installProcessGuard } from "../gate/transport/process-guard";

/**
 * The process guard (gate/transport/process-guard.ts) in the dynamic-provider host the engine started:
 * the engine's Cancel aborts the gate, a vanished engine ends the process. A caller that runs the
 * provider functions in its own process (the tests) keeps its own signal handling: a signal that
 * never aborts.
 */
export function providerGuard(): { signal: AbortSignal; onLeave: (fn: () => unknown) => () => void } {
  if (/dynamic-provider/.test(String(process.argv[1] ?? ""))) return installProcessGuard();
  return { signal: new AbortController().signal, onLeave: () => () => undefined };
}

/** During preview, an input not known yet reaches check and diff as this string (pulumi#6310). */
export const PULUMI_UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9";

/** The KEYS of PROPS that are set. */
export function pickKeys(props: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of keys) if (props[k] !== undefined) out[k] = props[k];
  return out;
}

/** PROPS without KEYS: what a provider measured beside its inputs. */
export function omitKeys(props: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(props)) if (!keys.includes(k)) out[k] = props[k];
  return out;
}

/** Order-independent JSON, so that key order never reads as a change. */
export function stable(v: unknown): string {
  if (v === undefined) return "undefined";
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(stable).join(",")}]`;
  const o = v as Record<string, unknown>;
  return `{${Object.keys(o)
    .filter((k) => o[k] !== undefined)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${stable(o[k])}`)
    .join(",")}}`;
}

/**
 * A provider's diff: a change when REPLACES (the keys that force a replacement) is not empty or an
 * input of INPUT_KEYS (set in the state OLDS or in NEWS) differs; the outputs named in STABLES are
 * kept only when nothing is replaced.
 */
export function inputsDiff(
  olds: Record<string, unknown>,
  news: Record<string, unknown>,
  inputKeys: readonly string[],
  replaces: string[],
  stables: string[],
): { changes: boolean; replaces: string[]; deleteBeforeReplace: boolean; stables: string[] } {
  const oldInputs = pickKeys(olds, inputKeys);
  const changed = Object.keys({ ...oldInputs, ...pickKeys(news, inputKeys) }).filter(
    (k) => stable(oldInputs[k]) !== stable(news[k]),
  );
  return {
    changes: replaces.length > 0 || changed.length > 0,
    replaces,
    deleteBeforeReplace: false,
    stables: replaces.length === 0 ? stables : [],
  };
}
