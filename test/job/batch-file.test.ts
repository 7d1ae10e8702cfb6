import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { fileLines, JobFileError, recoverResults, ResultLedger, scanInput } from "../../job/batch-file";
import { countLines, IdIndex, idHash } from "../../job/id-index";
import { tempDir, writeInput } from "./helpers";

const never = new AbortController().signal;

const result = (id: string, tokens = 3) =>
  JSON.stringify({
    id: `batch_req_${id}`,
    custom_id: id,
    response: { status_code: 200, request_id: "x", body: { usage: { completion_tokens: tokens } } },
    error: null,
  });

describe("the batch-input file", () => {
  it("is read whole once: its requests and the models they ask for", async () => {
    const dir = tempDir();
    writeInput(path.join(dir, "in.jsonl"), 5);
    const scan = await scanInput(path.join(dir, "in.jsonl"), never);
    expect(scan.requests).toBe(5);
    expect([...scan.models]).toEqual([["m", 5]]);
  });

  it("refuses a custom_id given twice, naming both lines, before any request", async () => {
    const dir = tempDir();
    const file = path.join(dir, "in.jsonl");
    writeInput(file, 3);
    fs.appendFileSync(file, fs.readFileSync(file, "utf8").split("\n")[1] + "\n");
    await expect(scanInput(file, never)).rejects.toThrow(/line 4 repeats custom_id "r-1" of line 2/);
  });

  it.each([
    ["not JSON", "{custom_id", /line 1 is not JSON/],
    [
      "an unknown endpoint",
      JSON.stringify({ custom_id: "a", method: "POST", url: "/v1/embeddings", body: { model: "m" } }),
      /line 1: url/,
    ],
    [
      "an unknown key",
      JSON.stringify({ custom_id: "a", method: "POST", url: "/v1/completions", body: { model: "m" }, extra: 1 }),
      /line 1: .*extra/,
    ],
    [
      "a GET",
      JSON.stringify({ custom_id: "a", method: "GET", url: "/v1/completions", body: { model: "m" } }),
      /line 1: method/,
    ],
    [
      "no model",
      JSON.stringify({ custom_id: "a", method: "POST", url: "/v1/completions", body: {} }),
      /line 1: body.model/,
    ],
  ])("refuses a line with %s, naming the line", async (_what, line, message) => {
    const file = path.join(tempDir(), "in.jsonl");
    fs.writeFileSync(file, `${line}\n`);
    const err = await scanInput(file, never).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(JobFileError);
    expect((err as Error).message).toMatch(message);
  });

  it("reads lines with their byte offsets across chunk boundaries and multi-byte characters", async () => {
    const file = path.join(tempDir(), "lines");
    const long = "é".repeat(70_000);
    fs.writeFileSync(file, `a\n${long}\nlast`);
    const lines = [];
    for await (const l of fileLines(file)) lines.push(l);
    expect(lines.map((l) => [l.text.length, l.complete])).toEqual([
      [1, true],
      [70_000, true],
      [4, false],
    ]);
    expect(lines[1].end).toBe(2 + Buffer.byteLength(long) + 1);
    expect(lines[2].end).toBe(fs.statSync(file).size);
  });
});

/** An input holding custom_ids IDS, scanned, and a ledger to match results against it (HASH: the index's). */
async function ledgerFor(ids: string[], hash?: (id: string) => [number, number]) {
  const input = path.join(tempDir(), "in.jsonl");
  const line = (id: string) =>
    JSON.stringify({ custom_id: id, method: "POST", url: "/v1/completions", body: { model: "m" } });
  fs.writeFileSync(input, `${ids.map(line).join("\n")}\n`);
  return new ResultLedger(input, await scanInput(input, never, hash));
}

describe("the output file is the checkpoint", () => {
  it("keeps whole lines and cuts off a last line a kill tore (no newline)", async () => {
    const file = path.join(tempDir(), "out.jsonl");
    const whole = `${result("a")}\n${result("b", 5)}\n`;
    fs.writeFileSync(file, `${whole}${result("c").slice(0, 40)}`);
    const ledger = await ledgerFor(["c", "a", "b"]);
    const r = await recoverResults(file, ledger);
    expect(r.count).toBe(2);
    expect([1, 2, 3].map((n) => ledger.done(n))).toEqual([false, true, true]);
    expect(r.tokens).toBe(8);
    expect(r.cut).toMatch(/line \(3\) was torn \(no newline/);
    expect(fs.readFileSync(file, "utf8")).toBe(whole);
  });

  it("cuts off a last line that is not JSON even with its newline", async () => {
    const file = path.join(tempDir(), "out.jsonl");
    fs.writeFileSync(file, `${result("a")}\n{"id":"batch_req_b","cus\n`);
    const ledger = await ledgerFor(["a", "b"]);
    const r = await recoverResults(file, ledger);
    expect(r.count).toBe(1);
    expect([ledger.done(1), ledger.done(2)]).toEqual([true, false]);
    expect(r.cut).toMatch(/not JSON/);
  });

  it("refuses a bad line that is not the last (no kill did that) and leaves the file as it is", async () => {
    const file = path.join(tempDir(), "out.jsonl");
    const text = `${result("a")}\ngarbage\n${result("b")}\n`;
    fs.writeFileSync(file, text);
    await expect(recoverResults(file, await ledgerFor(["a", "b"]))).rejects.toThrow(
      /line 2 is not a result line \(not JSON\) and is not the last/,
    );
    expect(fs.readFileSync(file, "utf8")).toBe(text);
  });

  it("refuses a custom_id recorded twice, in one file or in both", async () => {
    const file = path.join(tempDir(), "out.jsonl");
    fs.writeFileSync(file, `${result("a")}\n${result("a")}\n`);
    await expect(recoverResults(file, await ledgerFor(["a"]))).rejects.toThrow(/records custom_id "a" twice/);
    const errors = path.join(tempDir(), "out.errors.jsonl");
    fs.writeFileSync(file, `${result("a")}\n`);
    fs.writeFileSync(errors, `${result("a")}\n`);
    const ledger = await ledgerFor(["a", "b"]);
    await recoverResults(file, ledger);
    await expect(recoverResults(errors, ledger)).rejects.toThrow(/custom_id "a" is in both .*out\.jsonl and .*errors/);
  });

  it("refuses a custom_id the input does not hold (another job's output)", async () => {
    const file = path.join(tempDir(), "out.jsonl");
    fs.writeFileSync(file, `${result("a")}\n${result("zz")}\n`);
    await expect(recoverResults(file, await ledgerFor(["a", "b"]))).rejects.toThrow(
      /records custom_id "zz", which .*in\.jsonl does not hold/,
    );
  });
});

describe("the custom_ids by hash, never held", () => {
  // Every id hashed alike: each lookup takes the exact path (the lines read again and compared).
  const collide = (): [number, number] => [7, 7];

  it("tells ids whose hashes collide apart by reading their lines again: distinct ids pass, results land on their own lines", async () => {
    const ledger = await ledgerFor(["a", "b", "c", "d"], collide);
    const file = path.join(tempDir(), "out.jsonl");
    fs.writeFileSync(file, `${result("c")}\n${result("a")}\n`);
    expect((await recoverResults(file, ledger)).count).toBe(2);
    expect([1, 2, 3, 4].map((n) => ledger.done(n))).toEqual([true, false, true, false]);
    fs.writeFileSync(file, `${result("e")}\n`);
    await expect(recoverResults(file, ledger)).rejects.toThrow(/records custom_id "e", which/);
  });

  it("still refuses a real duplicate among colliding hashes, naming its first line", async () => {
    const file = path.join(tempDir(), "in.jsonl");
    writeInput(file, 6);
    fs.appendFileSync(file, fs.readFileSync(file, "utf8").split("\n")[4] + "\n");
    await expect(scanInput(file, never, collide)).rejects.toThrow(/line 7 repeats custom_id "r-4" of line 5/);
  });

  it("the table holds every id of an input far larger than one chunk, by its SHA-256 hash, and counts its lines", async () => {
    const file = path.join(tempDir(), "in.jsonl");
    writeInput(file, 5000);
    fs.appendFileSync(file, "\n");
    const scan = await scanInput(file, never);
    expect([scan.requests, scan.lines]).toEqual([5000, 5001]);
    expect(scan.index.lines(idHash("r-4321"))).toEqual([4322]);
    expect(scan.index.lines(idHash("r-5000"))).toEqual([]);
    expect(await countLines(file)).toBe(5001);
    fs.writeFileSync(file, "a\nb");
    expect(await countLines(file)).toBe(2);
  });

  it("a table sized for N lines refuses an id past its slots rather than probing forever", () => {
    const index = new IdIndex(2); // ceil(2 / 0.7) + 1 = 4 slots: three ids, one slot kept empty
    for (let i = 1; i <= 3; i++) index.add(idHash(`r-${i}`), i);
    expect(index.lines(idHash("r-3"))).toEqual([3]);
    expect(index.lines(idHash("r-9"))).toEqual([]);
    expect(() => index.add(idHash("r-4"), 4)).toThrow(/table is full: the input grew after its lines were counted/);
  });
});
