/**
 * The code's layers, as docs/architecture.md draws them, held by a test: no import circle anywhere
 * in the product, and no import from a lower layer up to a higher one. Imports are read with
 * TypeScript's own parser (type-only imports count: a type circle is still a circle).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(__dirname, "../..");

/** Lowest first. Entries are folders or files; a file belongs to the longest entry that holds it. */
export const LAYERS = [
  "ports.ts",
  "project-files.ts",
  "seeded-draws.ts",
  "physics",
  "gate/transport",
  "gate/base",
  "gate/readiness",
  "gate/judge",
  "gate/run",
  "gate/plan",
  "gate/health",
  "gate/reports",
  "gate/index.ts",
  "components",
  "simulator",
  "sim-host",
  "engine",
  "stack",
  "job",
  "cli",
  "index.ts",
  "lib.ts",
];

const sources = (p: string): string[] => {
  const abs = path.join(ROOT, p);
  if (!fs.existsSync(abs)) return [];
  if (fs.statSync(abs).isFile()) return [p];
  return fs
    .readdirSync(abs)
    .flatMap((e) => (e === "node_modules" ? [] : sources(path.join(p, e))))
    .filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts"));
};

/** Each product file's relative imports (and re-exports), resolved to repository paths. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const f of [...new Set(LAYERS.flatMap(sources))]) {
    const src = ts.createSourceFile(f, fs.readFileSync(path.join(ROOT, f), "utf8"), ts.ScriptTarget.Latest, true);
    const deps: string[] = [];
    const visit = (n: ts.Node) => {
      const spec =
        (ts.isImportDeclaration(n) || ts.isExportDeclaration(n)) && n.moduleSpecifier
          ? (n.moduleSpecifier as ts.StringLiteral).text
          : ts.isCallExpression(n) && n.expression.kind === ts.SyntaxKind.ImportKeyword
            ? (n.arguments[0] as ts.StringLiteral | undefined)?.text
            : undefined;
      if (spec?.startsWith(".")) {
        const t = path.normalize(path.join(path.dirname(f), spec)).replace(/\.js$/, "");
        deps.push(fs.existsSync(path.join(ROOT, `${t}.ts`)) ? `${t}.ts` : path.join(t, "index.ts"));
      }
      ts.forEachChild(n, visit);
    };
    visit(src);
    graph.set(f, deps);
  }
  return graph;
}

function layerOf(file: string): number {
  let best = -1;
  LAYERS.forEach((l, i) => {
    if ((file === l || file.startsWith(`${l}/`)) && (best < 0 || l.length > LAYERS[best].length)) best = i;
  });
  return best;
}

/** The strongly connected components of more than one file (Tarjan). */
function circles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const connect = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const c: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        c.push(w);
      } while (w !== v);
      if (c.length > 1) found.push(c.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) connect(v);
  return found;
}

describe("the code's layers (docs/architecture.md)", () => {
  const graph = importGraph();

  it("every product file has a layer, and the graph is the product's", () => {
    expect(graph.size).toBeGreaterThan(150);
    expect([...graph.keys()].filter((f) => layerOf(f) < 0)).toEqual([]);
  });

  it("no import circle anywhere in the product", () => {
    expect(circles(graph)).toEqual([]);
  });

  it("no import from a lower layer up to a higher one", () => {
    const up = [...graph].flatMap(([f, deps]) =>
      deps.filter((d) => layerOf(d) > layerOf(f)).map((d) => `${f} (${LAYERS[layerOf(f)]}) -> ${d}`),
    );
    expect(up).toEqual([]);
  });

  it("finds a circle and an upward arrow where there is one (the check itself can fail)", () => {
    const g = new Map([
      ["gate/judge/a.ts", ["gate/run/b.ts"]],
      ["gate/run/b.ts", ["gate/judge/a.ts"]],
    ]);
    expect(circles(g)).toEqual([["gate/judge/a.ts", "gate/run/b.ts"]]);
    expect(layerOf("gate/run/b.ts")).toBeGreaterThan(layerOf("gate/judge/a.ts"));
    expect(layerOf("components/drift/guard.ts")).toBeLessThan(layerOf("engine/pulumi.ts"));
  });
});
