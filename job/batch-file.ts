/**
 * The job's files, in the ecosystem's format (OpenAI's batch JSONL, as vLLM's run-batch and the batch
 * API read and write it): one request per input line, one result per output line, failures in an
 * errors file of the same line shape. Every file is read a line at a time, never whole, and no
 * custom_id is held: the input's are checked through a table of their hashes (17 bytes a line, while
 * the input is scanned and the results matched), and what is done is one byte per input line.
 *
 * The output and errors files are the checkpoint: what a killed run wrote in them is done, and a last
 * line a kill tore (no newline, or not JSON) is cut off and its request sent again. Nothing else is
 * kept on disk, so resume does not depend on the process having exited cleanly.
 */
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { z } from "zod";
import { countLines, IdIndex, idHash } from "./id-index";

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

/** What the input holds, read once before any request: its size, the models it asks for, its ids' lines. */
export interface InputScan {
  requests: number;
  /** The models the requests name, with how many ask for each. */
  models: Map<string, number>;
  /** Lines in the file, blank ones included (the size of the run's per-line state). */
  lines: number;
  /** Each custom_id's line, by hash; dropped by the caller once the results are matched to lines. */
  index: IdIndex;
  /** The hash the index is keyed by. */
  hash: (id: string) => [number, number];
}

/**
 * Reads the whole input once: every line valid, no custom_id twice (refused with both line numbers).
 * Memory: the index's 17 bytes a line, not the ids (id-index.ts).
 */
export async function scanInput(file: string, signal: AbortSignal, hash = idHash): Promise<InputScan> {
  const lines = await countLines(file);
  const index = new IdIndex(lines);
  const models = new Map<string, number>();
  let requests = 0;
  for await (const line of fileLines(file)) {
    if (signal.aborted) throw signal.reason as Error;
    if (line.number > lines)
      throw new JobFileError(
        `${file} grew while it was read (${lines} lines when counted): let its writer finish first`,
      );
    if (line.text.trim() === "") continue;
    const req = parseInputLine(file, line);
    const h = hash(req.custom_id);
    const seen = await lineWithId(file, index, h, req.custom_id, true);
    if (seen !== null)
      throw new JobFileError(
        `${file} line ${line.number} repeats custom_id ${JSON.stringify(req.custom_id)} of line ${seen}: results are matched on custom_id, so each must be unique`,
      );
    index.add(h, line.number);
    models.set(req.body.model, (models.get(req.body.model) ?? 0) + 1);
    requests++;
  }
  if (requests === 0) throw new JobFileError(`${file} holds no request`);
  return { requests, models, lines, index, hash };
}

/**
 * The line of FILE whose custom_id is ID, found by its hash in INDEX; null when none. Lines with the
 * same hash are read again and their ids compared, so two ids are never taken for one. EXACT: a lone
 * match is read again too (the duplicate check; a result's id matched to its line skips that read,
 * which would cost a pass over the input per result: a foreign id then passes only by a 64-bit
 * SHA-256 collision with one of the input's).
 */
async function lineWithId(
  file: string,
  index: IdIndex,
  hash: [number, number],
  id: string,
  exact: boolean,
): Promise<number | null> {
  const candidates = index.lines(hash);
  if (candidates.length === 0) return null;
  if (candidates.length === 1 && !exact) return candidates[0];
  const ids = await lineIds(file, candidates);
  return candidates.find((n) => ids.get(n) === id) ?? null;
}

/** The custom_id of each of LINES (line numbers) of FILE, read again. */
async function lineIds(file: string, lines: number[]): Promise<Map<number, unknown>> {
  const wanted = new Set(lines);
  const last = Math.max(...lines);
  const ids = new Map<number, unknown>();
  for await (const line of fileLines(file)) {
    if (wanted.has(line.number)) ids.set(line.number, (JSON.parse(line.text) as { custom_id?: unknown }).custom_id);
    if (line.number >= last) break;
  }
  return ids;
}

/** Which input line each recorded result is for: one byte a line, which results file recorded it (0: none yet). */
export class ResultLedger {
  readonly recorded: Uint8Array;
  private readonly files: string[] = [];

  constructor(
    private readonly input: string,
    private readonly scan: InputScan,
  ) {
    this.recorded = new Uint8Array(scan.lines + 1);
  }

  /** Records that FILE holds a result for ID: refused when the input holds no such id, or it is recorded already. */
  async record(file: string, id: string): Promise<void> {
    let mark = this.files.indexOf(file) + 1;
    if (mark === 0) mark = this.files.push(file);
    const line = await lineWithId(this.input, this.scan.index, this.scan.hash(id), id, false);
    if (line === null)
      throw new JobFileError(
        `${file} records custom_id ${JSON.stringify(id)}, which ${this.input} does not hold: another job's results? Give this job its own --output`,
      );
    const was = this.recorded[line];
    if (was === mark) throw new JobFileError(`${file} records custom_id ${JSON.stringify(id)} twice`);
    if (was !== 0)
      throw new JobFileError(`custom_id ${JSON.stringify(id)} is in both ${this.files[was - 1]} and ${file}`);
    this.recorded[line] = mark;
  }

  /** Whether input line NUMBER has a result already. */
  done(number: number): boolean {
    return this.recorded[number] !== 0;
  }
}

/** What a results file (output or errors) already holds. */
export interface RecoveredResults {
  /** Result lines kept. */
  count: number;
  /** Bytes of whole lines kept. */
  bytes: number;
  /** Completion tokens those lines' responses counted (usage.completion_tokens). */
  tokens: number;
  /** Why a torn last line was cut off; null when none was. */
  cut: string | null;
}

/**
 * What FILE records, each result matched to its input line in LEDGER, its torn last line cut off (a
 * kill during a write). A bad line that is not the last is no kill's doing: refused, the file left
 * as it is.
 */
export async function recoverResults(file: string, ledger: ResultLedger): Promise<RecoveredResults> {
  const out: RecoveredResults = { count: 0, bytes: 0, tokens: 0, cut: null };
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
    await ledger.record(file, parsed.custom_id);
    out.count++;
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
