/**
 * The one argv parser (cli/options.ts) refuses a bad value before anything runs, in one sentence
 * naming the flag, and --help is made from each command's table. The commands run as functions
 * against a port nothing listens on: a refusal must come before any request.
 */
import { describe, expect, it } from "vitest";
import { BENCH, benchMain } from "../../cli/bench";
import { compareMain } from "../../cli/compare";
import { planMain } from "../../cli/plan";
import { verifyMain } from "../../cli/verify";
import { parseFlags, UsageError } from "../../cli/options";
import { io } from "../gate/cli-fixture";

const NOWHERE = "http://127.0.0.1:9";

async function refusal(main: typeof benchMain, argv: string[]): Promise<string> {
  const o = io();
  expect(await main(argv, o), o.err()).toBe(2);
  expect(o.out()).toBe("");
  const [sentence, usage, ...rest] = o.err().split("\n");
  expect(usage).toMatch(/^usage: gpuhost /);
  expect(rest.join("")).toBe("");
  return sentence;
}

describe("bad numbers are refused in one sentence naming the flag (issue 18 point 10)", () => {
  it("hex, exponents, empty list items, negatives, unbounded values, empty paths", async () => {
    const cases: [typeof benchMain, string[], RegExp][] = [
      [
        verifyMain,
        ["--endpoint", NOWHERE, "--deadline", "0x10"],
        /^gpuhost verify: --deadline takes a plain decimal number \(digits and a decimal point only\), got "0x10"$/,
      ],
      [
        benchMain,
        ["--endpoint", NOWHERE, "--concurrency", "8,,16"],
        /^gpuhost bench: --concurrency takes a comma-separated list with no empty item, got "8,,16"$/,
      ],
      [benchMain, ["--endpoint", NOWHERE, "--concurrency", "8,16,"], /--concurrency .*no empty item/],
      [
        benchMain,
        ["--endpoint", NOWHERE, "--max-tokens", "1e12"],
        /^gpuhost bench: --max-tokens takes a list of a whole number \(digits only\), got "1e12"$/,
      ],
      [
        benchMain,
        ["--endpoint", NOWHERE, "--max-tokens", "1000000000000"],
        /^gpuhost bench: --max-tokens takes a list of a whole number of at most 1,048,576, got "1000000000000"$/,
      ],
      [benchMain, ["--endpoint", NOWHERE, "--max-tokens", "8,4096000"], /--max-tokens .* at most 1,048,576/],
      [benchMain, ["--endpoint", NOWHERE, "--sweep-max-tokens", "64"], /--sweep-max-tokens/],
      [
        verifyMain,
        ["--endpoint", NOWHERE, "--deadline", "-5"],
        /^gpuhost verify: --deadline takes a plain decimal number above 0, got "-5"$/,
      ],
      [
        verifyMain,
        ["--endpoint", NOWHERE, "--deadline=-5"],
        /--deadline takes a plain decimal number above 0, got "-5"/,
      ],
      [benchMain, ["--endpoint", NOWHERE, "--deadline", "Infinity"], /--deadline takes a plain decimal number/],
      [benchMain, ["--endpoint", NOWHERE, "--deadline", "99999999999"], /--deadline .* at most/],
      [
        benchMain,
        ["--endpoint", NOWHERE, "--json", ""],
        /^gpuhost bench: --json needs a file path, not an empty string$/,
      ],
      [benchMain, ["--endpoint", NOWHERE, "--error-budget", "-0.1"], /--error-budget takes a fraction from 0 to 1/],
      [benchMain, ["--endpoint", NOWHERE, "--error-budget", "0x1"], /--error-budget takes a fraction/],
      [
        benchMain,
        ["--endpoint", NOWHERE, "--prompts", "2.5"],
        /--prompts takes a whole number \(digits only\), got "2.5"/,
      ],
      [benchMain, ["--endpoint", ""], /--endpoint needs a value, not an empty string/],
      [benchMain, ["--endpoint"], /^gpuhost bench: --endpoint needs a value$/],
      [benchMain, ["--endpoint", "--model", "m"], /^gpuhost bench: --endpoint needs a value$/],
      [benchMain, ["--endpoint", NOWHERE, "--frobnicate"], /^gpuhost bench: unknown argument '--frobnicate'$/],
      [benchMain, ["--endpoint", NOWHERE, "stray"], /^gpuhost bench: unexpected argument 'stray'$/],
      [planMain, ["--throughput", "-1"], /--throughput takes a plain decimal number of at least 0, got "-1"/],
      [compareMain, ["--endpoint", NOWHERE, "--activate-command", "true", "--rate", "1,,2"], /--rate .*no empty item/],
      [
        compareMain,
        ["--endpoint", NOWHERE, "--activate-command", "true", "--thinking", "maybe"],
        /--thinking takes on or off, got "maybe"/,
      ],
      [
        compareMain,
        ["--endpoint", NOWHERE, "--activate-command", "true", "--mix", "chat=0x1"],
        /--mix takes CATEGORY=WEIGHT/,
      ],
    ];
    for (const [main, argv, expected] of cases) expect(await refusal(main, argv), argv.join(" ")).toMatch(expected);
  });

  it("good values still parse: decimals, percentages, --flag=value, repeated flags", () => {
    const v = parseFlags(BENCH.flags, [
      "--endpoint=http://h:1",
      "--concurrency",
      "1, 2,4",
      "--deadline",
      ".5",
      "--error-budget",
      "5%",
      "--max-tokens=1048576",
    ]);
    expect(v).toMatchObject({ endpoint: "http://h:1", concurrency: [1, 2, 4], deadline: 0.5, "max-tokens": [1048576] });
    expect(v["error-budget"]).toBeCloseTo(0.05);
    expect(() => parseFlags(BENCH.flags, [])).toThrow(UsageError);
  });
});

describe("--help is made from the command's table", () => {
  it("every visible row of bench's table is in its --help, with its default; hidden rows are not", async () => {
    const o = io();
    expect(await benchMain(["--help"], o)).toBe(0);
    for (const [name, flag] of Object.entries(BENCH.flags)) {
      if ("hidden" in flag) expect(o.out()).not.toMatch(new RegExp(`--${name}\\b(?!-)`));
      else expect(o.out()).toMatch(new RegExp(`^  --${name}\\b`, "m"));
    }
    expect(o.out()).toMatch(/--error-budget F +.*\(default 0\.01\)/);
    expect(o.out()).toMatch(/^exit status: 0 ok[^;]*; 1 .*; 2 usage; 3 .*; 4 .*; 130 interrupted$/m);
  });
});
