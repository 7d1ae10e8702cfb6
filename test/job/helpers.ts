/** What the job's tests share: an input file written from prompts, the job run in this process, the files read back. */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { onTestFinished } from "vitest";
import { runJob, type JobOptions, type JobResult } from "../../job/run";

/** A folder for one test, removed when the test ends. */
export function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-job-test-"));
  onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** An input of N requests, custom_id r-<i>, prompt p-<i>, alternating chat and completions (CHAT_ONLY: all chat). */
export function writeInput(file: string, n: number, model = "m", chatOnly = false): void {
  const lines = Array.from({ length: n }, (_, i) =>
    JSON.stringify(
      chatOnly || i % 2 === 0
        ? {
            custom_id: `r-${i}`,
            method: "POST",
            url: "/v1/chat/completions",
            body: { model, messages: [{ role: "user", content: `p-${i}` }], max_tokens: 8 },
          }
        : {
            custom_id: `r-${i}`,
            method: "POST",
            url: "/v1/completions",
            body: { model, prompt: `p-${i}`, max_tokens: 8 },
          },
    ),
  );
  fs.writeFileSync(file, lines.join("\n") + "\n");
}

export interface ResultLine {
  id: string;
  custom_id: string;
  response: { status_code: number; body: unknown } | null;
  error: { code: string; message: string } | null;
}

export function readLines(file: string): ResultLine[] {
  if (!fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as ResultLine);
}

/** How many times each custom_id is recorded across the output and errors files. */
export function recordedCounts(dir: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const l of [...readLines(path.join(dir, "out.jsonl")), ...readLines(path.join(dir, "out.errors.jsonl"))])
    counts.set(l.custom_id, (counts.get(l.custom_id) ?? 0) + 1);
  return counts;
}

/** The job in this process with quick retries; OVERRIDES for the test's own knobs. */
export function jobIn(
  dir: string,
  url: string,
  overrides: Partial<JobOptions> = {},
  interrupt: AbortController = new AbortController(),
): Promise<JobResult> {
  const say = overrides.say ?? (() => undefined);
  return runJob(
    {
      input: path.join(dir, "in.jsonl"),
      output: path.join(dir, "out.jsonl"),
      errors: path.join(dir, "out.errors.jsonl"),
      endpoint: url,
      apiKey: undefined,
      concurrency: 4,
      policy: { attempts: 4, backoffMs: 10, maxBackoffMs: 50, requestTimeoutMs: 10_000 },
      outageMs: 60_000,
      plan: { certifiedTokensPerSecond: null, hosts: 1, deadlineMs: null },
      timeScale: 1,
      windowMs: 60_000,
      progressEveryMs: 0,
      ...overrides,
      say,
    },
    interrupt.signal,
  );
}

/** Resolves once COND holds; rejects when JOB ends first (a job that failed early must not hang the test). */
export async function until(cond: () => boolean, job: Promise<unknown>): Promise<void> {
  let ended = false;
  void job.then(
    () => (ended = true),
    () => (ended = true),
  );
  while (!cond()) {
    if (ended) throw new Error("the job ended before the test's moment came");
    await new Promise((r) => setTimeout(r, 5));
  }
}
