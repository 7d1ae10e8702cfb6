/**
 * The wheel cache behind the test host's CUDA packages, without a download: a cached file whose hash
 * is not the pinned one is named and never used, and unpacking gives the files the modes NVIDIA's
 * .debs ship. (The real download and the packages built from it run in apt-toolkit.test.ts.)
 */
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Wheel } from "../../components/cuda-catalog/catalog";
import { cachedWheelPath, fetchWheels, unpackWheel } from "./cuda-wheels";
import { run } from "./proc";

describe("the CUDA wheel cache", () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-wheels-"));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  const wheelOf = (content: string): Wheel => ({
    name: "nvidia-example",
    version: "1.0",
    sha256: createHash("sha256").update(content).digest("hex"),
    prefix: "nvidia/cu13",
  });

  it("uses a cached wheel whose sha256 is the pinned one, without pip", async () => {
    const wheel = wheelOf("the pinned bytes");
    fs.writeFileSync(cachedWheelPath(wheel, dir), "the pinned bytes");
    const r = await fetchWheels([wheel], dir);
    expect(r.files.get("nvidia-example")).toBe(cachedWheelPath(wheel, dir));
    expect(r.downloaded).toEqual([]);
  });

  it("names a damaged cached wheel with both hashes instead of packaging it", async () => {
    const wheel = wheelOf("the pinned bytes");
    fs.writeFileSync(cachedWheelPath(wheel, dir), "other bytes");
    const other = createHash("sha256").update("other bytes").digest("hex");
    await expect(fetchWheels([wheel], dir)).rejects.toThrow(
      `sha256 ${other}, but components/cuda-catalog/cuda.yaml pins nvidia-example 1.0 at ${wheel.sha256}`,
    );
  });

  it("unpacks with 0755 for executables and 0644 for the rest, whatever modes the wheel carries", async () => {
    const whl = path.join(dir, "x.whl");
    const py = [
      "import sys, zipfile",
      "with zipfile.ZipFile(sys.argv[1], 'w') as z:",
      "    for name, mode in (('nvidia/cu13/bin/nvcc', 0o744), ('nvidia/cu13/include/x.h', 0o664)):",
      "        info = zipfile.ZipInfo(name)",
      "        info.external_attr = (0o100000 | mode) << 16",
      "        z.writestr(info, 'x')",
    ].join("\n");
    await run("python3", ["-c", py, whl]);
    await unpackWheel(whl, path.join(dir, "out"));
    const mode = (p: string) => fs.statSync(path.join(dir, "out/nvidia/cu13", p)).mode & 0o777;
    expect(mode("bin/nvcc")).toBe(0o755);
    expect(mode("include/x.h")).toBe(0o644);
  });
});
