// Loader for THE toolkit description (cuda.yaml): packages, versions, dependencies, files.
// Everything that needs to know what CUDA 13.0 consists of asks this module, so the simulated
// host (its stand-in packages: sim-host/standin.ts), the test host's .debs (built from NVIDIA's
// wheels), verification, the drift probe and `gpuhost doctor` cannot disagree. No Pulumi import:
// dynamic providers and the CLI load it from dist/.
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { projectFile } from "../../project-files";

const packageName = z.string().regex(/^[a-z0-9][a-z0-9.+-]+$/, "a Debian package name");

export const toolkitFileSchema = z
  .object({
    path: z.string().min(1).describe("Path relative to the toolkit root, or absolute if it starts with /"),
    kind: z
      .enum(["header", "library", "nvcc", "tool", "version-json", "keyring"])
      .optional()
      .describe("What the stand-in content of a regular file looks like; omit for links"),
    link: z.string().min(1).optional().describe("Symlink target, relative to the link's folder"),
    required: z.boolean().default(false).describe("Verified by CudaToolkit and hashed by the drift probe"),
  })
  .strict()
  .refine((f) => (f.kind === undefined) !== (f.link === undefined), "a file is either a kind or a link");

const wheelPath = z
  .string()
  .min(1)
  .refine((p) => !p.startsWith("/") && !p.split("/").includes(".."), "a relative path without ..");

export const wheelSchema = z
  .object({
    version: z.string().regex(/^[0-9][0-9A-Za-z.+!-]*$/, "a wheel version"),
    sha256: z.string().regex(/^[0-9a-f]{64}$/, "64 lowercase hex digits"),
    prefix: wheelPath.describe("The folder inside the wheel that holds bin/, include/, lib/ (nvidia/cu13)"),
  })
  .strict();

export const fromWheelSchema = z
  .object({
    wheel: z.string().min(1).describe("A name under wheels:"),
    from: wheelPath.describe("A file or folder inside the wheel, relative to its prefix"),
    to: wheelPath.describe("Where it lands, relative to the toolkit root"),
  })
  .strict();

export const toolkitPackageSchema = z
  .object({
    toolkit: z.string().optional().describe("Toolkit release this package belongs to; absent for cuda-keyring"),
    version: z.string().regex(/^[0-9][0-9A-Za-z.+~-]*$/, "a Debian version"),
    depends: z.array(packageName).default([]),
    fromWheel: z
      .array(fromWheelSchema)
      .default([])
      .describe("NVIDIA's files this package holds on the test host; none: stand-ins"),
    files: z.array(toolkitFileSchema).default([]),
  })
  .strict();

export const toolkitSchema = z
  .object({
    root: z.string().startsWith("/"),
    meta: packageName.describe("The meta package that installs the full toolkit"),
    nvccRelease: z.string(),
    nvccVersion: z.string(),
    nvccBuild: z.string(),
    nvccBuiltOn: z.string(),
    versionJson: z.string(),
    alternativesPriority: z.number().int().positive(),
    traps: z.record(z.string(), z.array(packageName)).default({}),
  })
  .strict();

const wheelName = z.string().regex(/^[a-z0-9][a-z0-9-]*$/, "a normalized wheel name (lowercase, dashes)");

export const newerWheelSchema = z
  .object({
    line: z.string().regex(/^[0-9]+\.[0-9]+$/, "a CUDA release line such as 13.1"),
    requiredBy: z.string().min(1).describe("The requirement chain that forces it, as pip resolved it"),
    safe: z.string().min(1).describe("Why it runs on the host's driver (minor-version compatibility, no newer PTX)"),
  })
  .strict();

export const cudaWheelsSchema = z
  .object({
    releaseWheels: z.array(wheelName).describe("Wheels versioned by the CUDA release: held to the serving line"),
    newerWheels: z.record(wheelName, newerWheelSchema).default({}),
    ownNumbering: z.array(wheelName).describe("NVIDIA wheels versioned on their own: not held to a line"),
  })
  .strict();

export const descriptionSchema = z
  .object({
    // Optional for a description that only lays out packages (tests); gpuhost's own names both.
    serving: z.string().optional().describe("THE CUDA release gpuhost installs and serves with (a key of toolkits)"),
    cudaWheels: cudaWheelsSchema.optional(),
    toolkits: z.record(z.string(), toolkitSchema),
    wheels: z.record(z.string(), wheelSchema).default({}),
    packages: z.record(packageName, toolkitPackageSchema),
  })
  .strict();

export type ToolkitFile = z.infer<typeof toolkitFileSchema>;
export type ToolkitPackage = z.infer<typeof toolkitPackageSchema> & { name: string };
export type Toolkit = z.infer<typeof toolkitSchema> & { release: string };
export type Wheel = z.infer<typeof wheelSchema> & { name: string };
export type FromWheel = z.infer<typeof fromWheelSchema>;
export type ToolkitDescription = z.infer<typeof descriptionSchema>;
export type CudaWheels = z.infer<typeof cudaWheelsSchema>;

/** A file as it lands on a host: absolute path, owning package, and what it is. */
export interface ResolvedFile {
  /** Absolute path on the host, e.g. /usr/local/cuda-13.0/include/curand.h */
  path: string;
  package: string;
  file: ToolkitFile;
}

/** The folder holding cuda.yaml, found from source (tsx) or from dist/. */
export function toolkitSourceDir(): string {
  return path.dirname(projectFile("components/cuda-catalog/cuda.yaml"));
}

let cached: ToolkitDescription | undefined;

/** Parse and validate a description; errors name the YAML path that is wrong. */
export function parseDescription(text: string): ToolkitDescription {
  const result = descriptionSchema.safeParse(parseYaml(text));
  if (!result.success) {
    const lines = result.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new Error(`invalid toolkit description:\n${lines.join("\n")}`);
  }
  const d = result.data;
  for (const [name, pkg] of Object.entries(d.packages)) {
    for (const dep of pkg.depends) {
      if (!d.packages[dep]) throw new Error(`invalid toolkit description: ${name} depends on unknown ${dep}`);
    }
    if (pkg.toolkit !== undefined && !d.toolkits[pkg.toolkit]) {
      throw new Error(`invalid toolkit description: ${name} names unknown toolkit ${pkg.toolkit}`);
    }
    for (const w of pkg.fromWheel) {
      if (!d.wheels[w.wheel])
        throw new Error(`invalid toolkit description: ${name} takes from unknown wheel ${w.wheel}`);
    }
    if (pkg.fromWheel.length > 0 && pkg.toolkit === undefined) {
      throw new Error(`invalid toolkit description: ${name} takes wheel files but names no toolkit`);
    }
  }
  if (d.serving !== undefined && !d.toolkits[d.serving])
    throw new Error(`invalid toolkit description: serving ${d.serving} is not a toolkit`);
  for (const [release, tk] of Object.entries(d.toolkits)) {
    if (!d.packages[tk.meta])
      throw new Error(`invalid toolkit description: toolkit ${release} meta ${tk.meta} unknown`);
    for (const [trap, pkgs] of Object.entries(tk.traps)) {
      for (const p of pkgs) if (!d.packages[p]) throw new Error(`toolkit ${release} trap ${trap}: unknown ${p}`);
    }
  }
  return d;
}

export function loadDescription(): ToolkitDescription {
  if (!cached) cached = parseDescription(fs.readFileSync(path.join(toolkitSourceDir(), "cuda.yaml"), "utf8"));
  return cached;
}

export function toolkit(release: string): Toolkit {
  const tk = loadDescription().toolkits[release];
  if (!tk)
    throw new Error(`unknown CUDA toolkit ${release}; known: ${Object.keys(loadDescription().toolkits).join(", ")}`);
  return { ...tk, release };
}

export function toolkitReleases(): string[] {
  return Object.keys(loadDescription().toolkits);
}

export function getPackage(name: string): ToolkitPackage {
  const pkg = loadDescription().packages[name];
  if (!pkg) throw new Error(`unknown package ${name}`);
  return { ...pkg, name };
}

export function allPackages(): ToolkitPackage[] {
  return Object.keys(loadDescription().packages).map(getPackage);
}

/** The dependency closure of `names` (themselves included), sorted by name. */
export function packagesOf(...names: string[]): string[] {
  const seen = new Set<string>();
  const stack = [...names];
  while (stack.length > 0) {
    const name = stack.pop()!;
    if (seen.has(name)) continue;
    seen.add(name);
    stack.push(...getPackage(name).depends);
  }
  return [...seen].sort();
}

function absolutePath(pkg: ToolkitPackage, file: ToolkitFile): string {
  if (file.path.startsWith("/")) return file.path;
  if (pkg.toolkit === undefined) throw new Error(`${pkg.name}: relative path ${file.path} without a toolkit`);
  return path.posix.join(toolkit(pkg.toolkit).root, file.path);
}

/** Every file each package lays down, with absolute host paths. */
export function filesOf(packageName: string): ResolvedFile[] {
  const pkg = getPackage(packageName);
  return pkg.files.map((file) => ({ path: absolutePath(pkg, file), package: pkg.name, file }));
}

/** The files CudaToolkit verifies and the drift probe hashes for a toolkit, sorted by path. */
export function requiredFiles(release: string): ResolvedFile[] {
  const tk = toolkit(release);
  return packagesOf(tk.meta)
    .flatMap(filesOf)
    .filter((f) => f.file.required)
    .sort((a, b) => a.path.localeCompare(b.path));
}

/**
 * Which package provides an absolute host path (or a path relative to a toolkit root when
 * `release` is given), e.g. "/usr/local/cuda-13.0/include/curand.h" -> "libcurand-dev-13-0".
 */
export function packageProviding(filePath: string, release?: string): string | undefined {
  const wanted =
    release !== undefined && !filePath.startsWith("/") ? path.posix.join(toolkit(release).root, filePath) : filePath;
  for (const pkg of allPackages()) {
    if (pkg.files.some((f) => absolutePath(pkg, f) === wanted)) return pkg.name;
  }
  return undefined;
}

/** The pinned wheels, by name. */
export function wheels(): Wheel[] {
  return Object.entries(loadDescription().wheels).map(([name, w]) => ({ ...w, name }));
}

/** The wheels a set of packages takes files from, by name. */
export function wheelsOf(packageNames: string[]): Wheel[] {
  const names = new Set(packageNames.flatMap((n) => getPackage(n).fromWheel.map((w) => w.wheel)));
  return wheels().filter((w) => names.has(w.name));
}

/** The toolkit packages by the trap name (e.g. "nvcc-only") with their dependency closure. */
export function trapPackages(release: string, trap: string): string[] {
  const pkgs = toolkit(release).traps[trap];
  if (!pkgs) throw new Error(`toolkit ${release} has no trap ${trap}`);
  return packagesOf(...pkgs);
}

/** Hash of the description itself: changes whenever a package, version or file changes. */
export function descriptionHash(): string {
  return crypto.createHash("sha256").update(JSON.stringify(loadDescription())).digest("hex").slice(0, 16);
}

/** THE CUDA release gpuhost installs and serves with ("13.0"): the one place it is written is cuda.yaml. */
export function servingRelease(): string {
  const release = loadDescription().serving;
  if (release === undefined) throw new Error("components/cuda-catalog/cuda.yaml names no serving release");
  return release;
}

/** How the venv's NVIDIA wheels are versioned (cuda.yaml cudaWheels). */
export function cudaWheels(): CudaWheels {
  const w = loadDescription().cudaWheels;
  if (w === undefined) throw new Error("components/cuda-catalog/cuda.yaml classifies no CUDA wheels (cudaWheels)");
  return w;
}

/** pip's normalized name: Nvidia_CUDA.nvcc -> nvidia-cuda-nvcc. */
export function normalizeWheelName(name: string): string {
  return name.toLowerCase().replace(/[-_.]+/g, "-");
}

/** The CUDA release line of a release wheel's version: 13.0.88 -> 13.0. */
export function releaseLine(version: string): string {
  return version.split(".").slice(0, 2).join(".");
}

/**
 * What is wrong with one NVIDIA wheel of a venv (or of a lock) held to `release`, as one sentence;
 * undefined when it is on the line, a declared exception on its declared line, versioned on its own,
 * or not an NVIDIA CUDA wheel at all. The lock test, the toolkit proof's report and drift ask this.
 */
export function foreignCudaWheel(name: string, version: string, release = servingRelease()): string | undefined {
  const n = normalizeWheelName(name);
  const w = cudaWheels();
  if (!n.startsWith("nvidia-") && !n.startsWith("cuda-")) return undefined;
  if (w.ownNumbering.includes(n)) return undefined;
  const newer = w.newerWheels[n];
  if (newer !== undefined) {
    if (releaseLine(version) === newer.line) return undefined;
    return `${n} ${version} is of CUDA ${releaseLine(version)}, not the ${newer.line} line cuda.yaml allows it (${newer.requiredBy})`;
  }
  if (!w.releaseWheels.includes(n))
    return `${n} ${version} is an NVIDIA wheel cuda.yaml does not classify (cudaWheels: releaseWheels or ownNumbering)`;
  if (releaseLine(version) !== release)
    return `${n} ${version} is of CUDA ${releaseLine(version)}, beside the CUDA ${release} toolkit`;
  return undefined;
}
