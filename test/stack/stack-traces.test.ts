/**
 * stack/stack-traces.ts: the program swaps the SDK's source-map-support for Node's own source maps
 * (a third of a no-op `up`'s program CPU went to source-map-support mapping the SDK's per-resource
 * stack traces), and a stack trace still names the TypeScript file and line. Checked in a child
 * Node, set up as the SDK's program host sets itself up: source-map-support installed first, then a
 * module compiled with its source map (both compiled here by TypeScript, the module under test from
 * its own source).
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as ts from "typescript";
import { afterAll, describe, expect, it } from "vitest";
import { projectRoot } from "../../project-files";

const PROJECT_ROOT = projectRoot();

const work = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-stack-traces-"));
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

/** SOURCE compiled to WORK/NAME.js with its source map beside it, as tsc (sourceMap: true) writes them. */
function compile(name: string, source: string): void {
  const out = ts.transpileModule(source, {
    fileName: `${name}.ts`,
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, sourceMap: true },
  });
  fs.writeFileSync(path.join(work, `${name}.js`), out.outputText);
  fs.writeFileSync(path.join(work, `${name}.js.map`), out.sourceMapText!);
}

compile("stack-traces", fs.readFileSync(path.join(PROJECT_ROOT, "stack", "stack-traces.ts"), "utf8"));
// The Error is made on line 4 of thrower.ts; the compiled line differs (the module header comes first).
compile(
  "thrower",
  [
    "// a program module",
    "",
    "export function where(): string {",
    '  return new Error("here").stack ?? "";',
    "}",
    "",
  ].join("\n"),
);

/** A child Node set up as `@pulumi/pulumi/cmd/run` is (source-map-support first); NATIVE: the program then calls useNodeSourceMaps. */
function traceIn(native: boolean): { stack: string; prepareStackTrace: string } {
  const script = [
    `require(${JSON.stringify(require.resolve("source-map-support/register", { paths: [PROJECT_ROOT] }))});`,
    native ? 'require("./stack-traces.js").useNodeSourceMaps();' : "",
    'const stack = require("./thrower.js").where();',
    "console.log(JSON.stringify({ stack, prepareStackTrace: typeof Error.prepareStackTrace }));",
  ].join("\n");
  const r = spawnSync(process.execPath, ["-e", script], { cwd: work, encoding: "utf8", timeout: 30_000 });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { stack: string; prepareStackTrace: string };
}

describe("useNodeSourceMaps", () => {
  it("takes source-map-support's formatter away, and a stack still names the TypeScript line", () => {
    const { stack, prepareStackTrace } = traceIn(true);
    expect(prepareStackTrace).toBe("undefined");
    expect(stack).toMatch(/thrower\.ts:4:\d+/);
    expect(stack).not.toMatch(/thrower\.js:/);
  });

  it("is what changes it: without the call, source-map-support formats (and maps) the same stack", () => {
    const { stack, prepareStackTrace } = traceIn(false);
    expect(prepareStackTrace).toBe("function");
    expect(stack).toMatch(/thrower\.ts:4:\d+/);
  });
});
