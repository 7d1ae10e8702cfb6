/**
 * The job's files, in the ecosystem's format (OpenAI's batch JSONL, as vLLM's run-batch and the batch
 * API read and write it): one request per input line, one result per output line, failures in an
 * errors file of the same line shape. Every file is read a line at a time, never whole: a
 * 1,000,000-line input holds memory only for the set of its custom_ids.
 *
 * The output and errors files are the checkpoint: what a killed run wrote in them is done, and a last
 * line a kill tore (no newline, or not JSON) is cut off and its request sent again. Nothing else is
 * kept on disk, so resume does not depend on the process having exited cleanly.
 */
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { z } from "zod";

/** The endpoints a job line may name (the batch API's two text endpoints). */
export const JOB_URLS = ["/v1/chat/completions", "/v1/completions"] as const;

export const BatchInputLineSchema = z.strictObject({
  custom_id: z.string().min(1),
  method: z.literal("POST"),
  url: z.enum(JOB_URLS),
  body: z.looseObject({ model: z.string().min(1) }),
});
export type BatchRequest = z.infer<typeof BatchInputLineSchema>;

/** One output or errors line: `response` for what the server answered, `error` for why it failed. */
export interface BatchResultLine {
  id: string;
  custom_id: string;
  response: { status_code: number; request_id: string; body: unknown } | null;
  error: { code: string; message: string } | null;
}

/** A job file that cannot be used as it is: said in one sentence naming the file and line. */
export class JobFileError extends Error {}

export interface FileLine {
  /** 1-based. */
  number: number;
  text: string;
  /** Byte offset just past the line (its newline included). */
  end: number;
  /** Whether the line ended with a newline (the last line of a killed writer may not). */
  complete: boolean;
}

const READ_CHUNK = 1 << 16;

/** The lines of FILE with their byte offsets, read a chunk at a time. */
export async function* fileLines(file: string): AsyncGenerator<FileLine> {
  const stream = fs.createReadStream(file, { highWaterMark: READ_CHUNK });
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let offset = 0;
  let number = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, nl);
      const text = pendingBytes > 0 ? Buffer.concat([...pending, piece]).toString("utf8") : piece.toString("utf8");
      offset += pendingBytes + piece.length + 1;
      pending = [];
      pendingBytes = 0;
      start = nl + 1;
      yield { number: ++number, text, end: offset, complete: true };
    }
    if (start < chunk.length) {
      pending.push(Buffer.from(chunk.subarray(start)));
      pendingBytes += chunk.length - start;
    }
  }
  if (pendingBytes > 0)
    yield {
      number: number + 1,
      text: Buffer.concat(pending).toString("utf8"),
      end: offset + pendingBytes,
      complete: false,
    };
}

/** One input line parsed, or a JobFileError naming the file, line and field. */
export function parseInputLine(file: string, line: FileLine): BatchRequest {
  let json: unknown;
  try {
    json = JSON.parse(line.text);
  } catch (e) {
    throw new JobFileError(`${file} line ${line.number} is not JSON (${(e as Error).message})`);
  }
  const r = BatchInputLineSchema.safeParse(json);
  if (!r.success) {
    const i = r.error.issues[0];
    throw new JobFileError(`${file} line ${line.number}: ${i.path.map(String).join(".") || "the line"}: ${i.message}`);
  }
  return r.data;
}

/** What the input holds, read once before any request: its size and the models it asks for. */
export interface InputScan {
  requests: number;
  /** The models the requests name, with how many ask for each. */
  models: Map<string, number>;
  /** Every custom_id, with its line (for the results' check against it); dropped by the caller once checked. */
  ids: Map<string, number>;
}

/** Reads the whole input once: every line valid, no custom_id twice (refused with both line numbers). */
export async function scanInput(file: string, signal: AbortSignal): Promise<InputScan> {
  const firstLine = new Map<string, number>();
  const models = new Map<string, number>();
  let requests = 0;
  for await (const line of fileLines(file)) {
    if (signal.aborted) throw signal.reason as Error;
    if (line.text.trim() === "") continue;
    const req = parseInputLine(file, line);
    const seen = firstLine.get(req.custom_id);
    if (seen !== undefined)
      throw new JobFileError(
        `${file} line ${line.number} repeats custom_id ${JSON.stringify(req.custom_id)} of line ${seen}: results are matched on custom_id, so each must be unique`,
      );
    firstLine.set(req.custom_id, line.number);
    models.set(req.body.model, (models.get(req.body.model) ?? 0) + 1);
    requests++;
  }
  if (requests === 0) throw new JobFileError(`${file} holds no request`);
  // The map itself, not a copy of its keys: at 1,000,000 lines the copy doubled the peak.
  return { requests, models, ids: firstLine };
}

/** What a results file (output or errors) already holds. */
export interface RecoveredResults {
  ids: Set<string>;
  /** Bytes of whole lines kept. */
  bytes: number;
  /** Completion tokens those lines' responses counted (usage.completion_tokens). */
  tokens: number;
  /** Why a torn last line was cut off; null when none was. */
  cut: string | null;
}

/**
 * The custom_ids FILE records, its torn last line cut off (a kill during a write). A bad line that is
 * not the last is no kill's doing: refused, the file left as it is.
 */
export async function recoverResults(file: string): Promise<RecoveredResults> {
  const out: RecoveredResults = { ids: new Set(), bytes: 0, tokens: 0, cut: null };
  if (!fs.existsSync(file)) return out;
  let bad: { line: FileLine; why: string } | null = null;
  for await (const line of fileLines(file)) {
    if (bad !== null)
      throw new JobFileError(
        `${file} line ${bad.line.number} is not a result line (${bad.why}) and is not the last: the file was changed by something other than a killed job; repair or move it`,
      );
    const parsed = resultOf(line);
    if (typeof parsed === "string") {
      bad = { line, why: parsed };
      continue;
    }
    if (out.ids.has(parsed.custom_id))
      throw new JobFileError(`${file} records custom_id ${JSON.stringify(parsed.custom_id)} twice`);
    out.ids.add(parsed.custom_id);
    out.tokens += completionTokensOf(parsed.response?.body);
    out.bytes = line.end;
  }
  if (bad !== null) {
    fs.truncateSync(file, out.bytes);
    out.cut = `${file}: the last line (${bad.line.number}) was torn (${bad.why}); cut off, its request is sent again`;
  }
  return out;
}

/** A whole result line, or why it is none. */
function resultOf(line: FileLine): BatchResultLine | string {
  if (!line.complete) return "no newline at its end";
  try {
    const json = JSON.parse(line.text) as Partial<BatchResultLine> | null;
    if (typeof json?.custom_id !== "string") return "no custom_id";
    return json as BatchResultLine;
  } catch {
    return "not JSON";
  }
}

/** usage.completion_tokens of a response body, 0 where it names none. */
export function completionTokensOf(body: unknown): number {
  const n = Number((body as { usage?: { completion_tokens?: unknown } } | null)?.usage?.completion_tokens);
  return Number.isFinite(n) && n > 0 ? n : 0;
}

/**
 * The output and errors files, appended one whole line per write(2): a kill leaves at most the last
 * line torn, which recoverResults cuts off. No buffering here, so Ctrl-C loses nothing written.
 */
export class ResultFiles {
  private readonly out: number;
  private readonly err: number;
  bytesWritten = 0;

  constructor(output: string, errors: string) {
    this.out = fs.openSync(output, "a");
    this.err = fs.openSync(errors, "a");
  }

  write(line: Omit<BatchResultLine, "id">, failed: boolean): number {
    const text = `${JSON.stringify({ id: `batch_req_${randomUUID().replace(/-/g, "")}`, ...line })}\n`;
    const bytes = Buffer.byteLength(text);
    fs.writeSync(failed ? this.err : this.out, text);
    if (!failed) this.bytesWritten += bytes;
    return bytes;
  }

  close(): void {
    fs.closeSync(this.out);
    fs.closeSync(this.err);
  }
}
