/**
 * The knobs of the serving environment (service user, Python venv, pinned packages, FlashInfer JIT
 * cache): the single source of their defaults and documentation.
 */
import { z } from "zod";
import { PATH_MAX_CHARS, URL_MAX_CHARS, VERSION_MAX_CHARS, atMostChars } from "../text-bounds";

/** A path that reaches shell scripts (as quoted arguments) and bare unit directives. */
export const systemPath = z
  .string()
  .max(PATH_MAX_CHARS, atMostChars(PATH_MAX_CHARS))
  .regex(/^\/[A-Za-z0-9._+@/-]*$/, "must be an absolute path of letters, digits and ._+@-/")
  .refine((p) => !p.split("/").includes(".."), "must not contain '..'");

/** A PEP 440 version, optionally with a local label (+cu130). */
const pipVersion = z
  .string()
  .max(VERSION_MAX_CHARS, atMostChars(VERSION_MAX_CHARS))
  .regex(/^[0-9][0-9A-Za-z.!+_-]*$/, "must be a version such as 2.14.1 or 2.14.1+cu130");

// https only (file:// for an index on the host itself): over http:// anyone on the path can swap the
// wheels pip installs as root.
export const pipIndexUrlSchema = z
  .string()
  .max(URL_MAX_CHARS, atMostChars(URL_MAX_CHARS))
  .refine((u) => !/^http:\/\//i.test(u), "must be https:// (or file:// for an index on the host): http:// is refused")
  .pipe(z.url({ protocol: /^(https|file)$/, error: "must be an https:// or file:// URL" }))
  .refine((u) => !/[\s'"\\]/.test(u), "must not contain whitespace, quotes or backslashes");

export const PinnedPackagesSchema = z
  .object({
    torch: pipVersion
      .default("2.14.1+cu130")
      .describe(
        "torch, the CUDA 13.0 build: the local label (+cu130) must match the toolkit, and is checked before anything is installed; a hash lock may pin the same version unlabelled when its nvidia-cuda-runtime is of that CUDA release.",
      ),
    sglang: pipVersion
      .default("0.5.23")
      .describe("sglang (its wheel pins torch and flashinfer-python: keep these three consistent)."),
    flashinferPython: pipVersion.default("0.7.2").describe("flashinfer-python."),
    flashinferJitCache: pipVersion
      .optional()
      .describe(
        "flashinfer-jit-cache (precompiled kernels) matching flashinferPython and the toolkit, e.g. 0.7.2+cu130; unset where no wheel matches (kernels are then JIT-compiled into the keyed cache).",
      ),
    ninja: pipVersion.default("1.13.2").describe("ninja: FlashInfer's JIT build tool."),
  })
  .strict();

export const EnvironmentSchema = z
  .object({
    serviceUser: z
      .string()
      .regex(
        /^[a-z_][a-z0-9_-]{0,31}$/,
        "must be a plain system user name (lowercase letters, digits, '_' or '-', at most 32)",
      )
      .default("sglang")
      .describe("System user the services run as (created when missing, no login shell)."),
    serviceHome: systemPath
      .default("/var/lib/sglang")
      .describe("Home of the service user (caches that are not keyed by the toolkit)."),
    venvPath: systemPath.default("/opt/gpuhost/venv").describe("Python virtual environment holding the serving stack."),
    python: systemPath.default("/usr/bin/python3").describe("Interpreter the virtual environment is created from."),
    packages: PinnedPackagesSchema.prefault({}).describe("Pinned versions of the serving stack."),
    pipIndexUrl: pipIndexUrlSchema.optional().describe("pip --index-url; unset: pip's configured default."),
    pipExtraIndexUrls: z
      .array(pipIndexUrlSchema)
      .default([])
      .describe(
        "pip --extra-index-url: where the CUDA 13.0 torch build and flashinfer-jit-cache wheels are published.",
      ),
    requirementsLock: z
      .string()
      .min(1)
      .refine((p) => !/[\0\n]/.test(p), "must be a file path")
      .optional()
      .describe(
        "A pip requirements file pinning every package with --hash=sha256:... (`pip-compile --generate-hashes`), relative to the project folder; pip then installs with --require-hashes. Required on a real host whenever an index is remote (pip's default, or an https:// one); it must pin the `packages` versions.",
      ),
    jitCacheBase: systemPath
      .default("/var/cache/gpuhost/flashinfer")
      .describe(
        "Parent of FlashInfer's JIT caches. Each toolkit fingerprint gets its own FLASHINFER_WORKSPACE_BASE below it, so a changed toolkit can never reuse stale kernels.",
      ),
    prewarm: z
      .boolean()
      .default(false)
      .describe(
        "Compile FlashInfer's sampling kernels (the ones that include curand.h) once at provisioning, on a GPU, instead of on the first request.",
      ),
  })
  .strict()
  .describe("The serving environment: service user, Python venv, pinned packages, FlashInfer JIT cache.");

export type EnvironmentConfig = z.infer<typeof EnvironmentSchema>;
