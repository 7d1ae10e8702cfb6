/**
 * What gpuhost's dynamic-provider implementations share (VerifiedGeneration, ServiceComparison,
 * FleetVerification, ToolkitState): the process guard when hosted by the engine, and the typed
 * inputs kit: each provider declares its inputs once, as one zod schema and the keys whose change
 * replaces, and its check, diff, input picking and typed decoding derive from that declaration, so
 * no provider casts what the engine hands it. Loaded normally by
 * the implementations, never serialized (the state holds only components/call-time-provider.ts's
 * object).
 */
import type { z } from "zod";
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

/** The value is, or holds somewhere inside it, an input not known yet (preview). */
export function holdsUnknown(v: unknown): boolean {
  if (v === PULUMI_UNKNOWN) return true;
  return typeof v === "object" && v !== null && JSON.stringify(v).includes(PULUMI_UNKNOWN);
}

export interface CheckFailure {
  property: string;
  reason: string;
}

export interface ProviderDiff {
  changes: boolean;
  replaces: string[];
  deleteBeforeReplace: boolean;
  stables: string[];
}

/** The inputs as the provider's code reads them: its schema's output. */
export type Decoded<S extends z.ZodRawShape> = z.output<z.ZodObject<S>>;

/** A provider's inputs, declared once (providerInputs): everything about them derives from this. */
export interface ProviderInputs<S extends z.ZodRawShape> {
  /** Every input key, in the schema's order. */
  readonly keys: readonly (keyof S & string)[];
  /** The inputs whose change replaces the resource (a fresh measurement). */
  readonly replaceKeys: readonly (keyof S & string)[];
  /**
   * The engine's check: each input validated by its own field of the schema, by property (the
   * path inside it in the reason); an input not known yet (preview) is not judged. The inputs are
   * returned as given: validation never rewrites what the state records.
   */
  readonly check: (news: Record<string, unknown>) => { inputs: Record<string, unknown>; failures: CheckFailure[] };
  /**
   * The typed inputs of new inputs or of a state, each parsed by its own field of the schema (its
   * defaults filled in), or an error naming every input that is not what the schema says. ONLY:
   * the inputs this method reads (a refresh decodes only those, so an older state's input it does
   * not use never fails it). For the code that runs; what the state records stays `pick`'s.
   */
  readonly decode: <K extends keyof Decoded<S> & string = keyof Decoded<S> & string>(
    props: Record<string, unknown>,
    only?: readonly K[],
  ) => Pick<Decoded<S>, K>;
  /** The inputs of a state or of new inputs (keys that are set), as given. */
  readonly pick: <P extends object>(props: P) => Pick<P, Extract<keyof P, keyof S>>;
  /** What the provider recorded beside its inputs (and without inputs it no longer has). */
  readonly measured: (props: Record<string, unknown>) => Record<string, unknown>;
  /**
   * The diff: a change when a replace key differs (or EXTRA_REPLACES, the provider's own reasons
   * from the recorded state, is not empty) or any other input differs; STABLES are the outputs
   * kept when nothing is replaced.
   */
  readonly diff: (
    olds: Record<string, unknown>,
    news: Record<string, unknown>,
    o: { extraReplaces?: string[]; stables: string[] },
  ) => ProviderDiff;
}

/**
 * Declares a provider's inputs: SCHEMA (one field per input) and REPLACES (the inputs whose change
 * replaces). RETIRED: keys that were inputs of older states and are neither inputs nor
 * measurements now (dropped on update).
 */
export function providerInputs<S extends z.ZodRawShape>(
  schema: z.ZodObject<S>,
  o: { replaces: readonly (keyof S & string)[]; retired?: readonly string[] },
): ProviderInputs<S> {
  const keys = Object.keys(schema.shape) as (keyof S & string)[];
  const replaceKeys = [...o.replaces];
  const notMeasured = [...keys, ...(o.retired ?? [])];
  const fields = (only: readonly string[]) =>
    only.map((key): [string, z.ZodType] => [key, schema.shape[key] as z.ZodType]);
  return {
    keys,
    replaceKeys,
    check: (news) => {
      const failures: CheckFailure[] = [];
      for (const [key, field] of fields(keys)) {
        if (holdsUnknown(news[key])) continue;
        const r = field.safeParse(news[key]);
        if (!r.success) failures.push(...fieldFailures(key, r.error));
      }
      return { inputs: news, failures };
    },
    decode: <K extends keyof Decoded<S> & string>(props: Record<string, unknown>, only?: readonly K[]) => {
      const out: Record<string, unknown> = {};
      const failures: CheckFailure[] = [];
      for (const [key, field] of fields(only ?? keys)) {
        const r = field.safeParse(props[key]);
        if (r.success) {
          if (r.data !== undefined) out[key] = r.data;
        } else failures.push(...fieldFailures(key, r.error));
      }
      // Each reason names its input (a reason about the whole input says it first).
      const named = failures.map((f) => (f.reason.startsWith(f.property) ? f.reason : `${f.property}: ${f.reason}`));
      if (failures.length > 0) throw new Error(`the resource's inputs are not valid: ${named.join("; ")}`);
      // Each key was parsed by its own field of the schema: the object is that schema's output.
      return out as Pick<Decoded<S>, K>;
    },
    // Only keys the props have are kept: the props' own type holds for what is picked.
    pick: <P extends object>(props: P) =>
      pickKeys(props as Record<string, unknown>, keys) as Pick<P, Extract<keyof P, keyof S>>,
    measured: (props) => omitKeys(props, notMeasured),
    diff: (olds, news, d) => {
      const replaces = [...replaceKeys.filter((k) => stable(olds[k]) !== stable(news[k])), ...(d.extraReplaces ?? [])];
      return inputsDiff(olds, news, keys, replaces, d.stables);
    },
  };
}

/** The input KEY's failures, by property, with the path inside it in the reason. */
function fieldFailures(key: string, error: z.ZodError): CheckFailure[] {
  return error.issues.map((issue) => ({
    property: key,
    reason: issue.path.length > 0 ? `${[key, ...issue.path.map(String)].join(".")}: ${issue.message}` : issue.message,
  }));
}

/** The KEYS of PROPS that are set. */
function pickKeys(props: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of keys) if (props[k] !== undefined) out[k] = props[k];
  return out;
}

/** PROPS without KEYS: what a provider measured beside its inputs. */
function omitKeys(props: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
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
function inputsDiff(
  olds: Record<string, unknown>,
  news: Record<string, unknown>,
  inputKeys: readonly string[],
  replaces: string[],
  stables: string[],
): ProviderDiff {
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
