import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { renderConfigDoc } from "../../stack/config-doc";
import { ROOT } from "./stacks";

describe("docs/configuration.md", () => {
  it("is what stack/config-doc.ts renders from the schema (run `npm run gpuhost -- config-doc --write`)", () => {
    const committed = fs.readFileSync(path.join(ROOT, "docs", "configuration.md"), "utf8");
    expect(committed).toBe(renderConfigDoc());
  });

  it("lists every knob with its default and description", () => {
    const doc = renderConfigDoc();
    expect(doc).toContain("| `services.port` | integer, >= 1, <= 65535 | `30000` | --port the server listens on. |");
    expect(doc).toContain("| `services.timeoutStartSec` |");
    expect(doc).toContain('| `environment.packages.torch` | string | `"2.14.1+cu130"` |');
    expect(doc).toContain("`verification.deadlineSeconds`");
    expect(doc).toContain("`benchmark.concurrency`");
    expect(doc).toContain("`workload.completions`");
    expect(doc).toContain("`simulator.timeScale`");
    expect(doc).toContain("`toolkit.repository.url`");
    // A row without a description is a knob nobody explained.
    const undocumented = doc.split("\n").filter((l) => /^\| `[^`]+` \|/.test(l) && /\|\s*\|$/.test(l));
    expect(undocumented).toEqual([]);
  });
});
