/**
 * The test host's root filesystem: a Debian minbase tree built once with debootstrap and cached as a
 * zstd tarball OUTSIDE the repository. The cache file name carries a hash of the recipe (suite,
 * variant, package list, post-build steps), so changing the recipe builds a new tree instead of
 * silently reusing a stale one.
 */
import { createHash } from "node:crypto";
import { existsSync, promises as fs, readFileSync } from "node:fs";
import * as path from "node:path";
import { z } from "zod";
import { run, withLock } from "./proc";

/** Every knob of the cached root filesystem, with its default. */
export const RootfsRecipeSchema = z.object({
  suite: z.string().default("bookworm").describe("Debian suite debootstrap installs."),
  variant: z.string().default("minbase").describe("debootstrap --variant."),
  packages: z
    .array(z.string())
    .default([
      // a real systemd host: systemd as PID 1, journald, D-Bus for systemctl
      "systemd",
      "systemd-sysv",
      "dbus",
      // reached over SSH like a real GPU host
      "openssh-server",
      "iproute2",
      "sudo",
      // apt over HTTP with signed-by keyrings (gpgv comes with apt)
      "ca-certificates",
      // the serving environment: a venv that pip-installs the Python stack
      "python3",
      "python3-venv",
      // the SGLang stand-in execs the project's simulator, which is Node.js
      "nodejs",
      // curl for probes the components may run on the host
      "curl",
      // NVIDIA's nvcc compiles the host half of the toolkit's proof program with the distribution's
      // g++ (and links with its ld), as on a real Debian 12 GPU host
      "g++",
    ])
    .describe("Debian packages installed into the tree (debootstrap --include)."),
  mirror: z
    .string()
    .optional()
    .describe(
      "Debian mirror URL; default: GPUHOST_DEBIAN_MIRROR, then the host's own apt sources. Not part of the cache key.",
    ),
  keepDebianSources: z
    .boolean()
    .default(false)
    .describe(
      "Keep the Debian mirror in the tree's apt sources. Off by default so `apt-get update` in tests reads only the local stand-in repository (hermetic and fast).",
    ),
  cacheDir: z
    .string()
    .default(process.env.GPUHOST_TESTHOST_CACHE ?? "/var/cache/gpuhost/testhost")
    .describe("Where cached tarballs live (env GPUHOST_TESTHOST_CACHE). Outside the repository, never committed."),
});
export type RootfsRecipe = z.infer<typeof RootfsRecipeSchema>;

/** Bumped whenever the post-build steps below change meaning, so the cache key follows them. */
const POST_BUILD_VERSION = 2;

export function recipeHash(recipe: RootfsRecipe): string {
  const key = JSON.stringify({
    suite: recipe.suite,
    variant: recipe.variant,
    packages: [...recipe.packages].sort(),
    keepDebianSources: recipe.keepDebianSources,
    post: POST_BUILD_VERSION,
  });
  return createHash("sha256").update(key).digest("hex").slice(0, 12);
}

export function cachedTarballPath(recipe: RootfsRecipe): string {
  return path.join(recipe.cacheDir, `${recipe.suite}-${recipeHash(recipe)}.tar.zst`);
}

/** The Debian mirror this machine already uses, so debootstrap needs no extra network access. */
export function hostDebianMirror(): string {
  if (process.env.GPUHOST_DEBIAN_MIRROR) return process.env.GPUHOST_DEBIAN_MIRROR;
  const deb822 = "/etc/apt/sources.list.d/debian.sources";
  if (existsSync(deb822)) {
    for (const stanza of readFileSync(deb822, "utf8").split(/\n\s*\n/)) {
      const uri = /^URIs:\s*(\S+)/m.exec(stanza)?.[1];
      const suites = /^Suites:\s*(.+)$/m.exec(stanza)?.[1] ?? "";
      if (uri && /(^|\s)bookworm(\s|$)/.test(suites)) return uri;
    }
  }
  const classic = "/etc/apt/sources.list";
  if (existsSync(classic)) {
    const m = /^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+bookworm\s/m.exec(readFileSync(classic, "utf8"));
    if (m) return m[1];
  }
  return "http://deb.debian.org/debian";
}

export interface RootfsBuildReport {
  tarball: string;
  /** true when this call ran debootstrap (the slow path). */
  built: boolean;
  seconds: number;
}

/**
 * Returns the cached tarball for this recipe, building it first when absent. Concurrent callers
 * (vitest runs two files at once) serialize on a lock so only one debootstrap runs.
 */
export async function ensureRootfsTarball(input: Partial<RootfsRecipe> = {}): Promise<RootfsBuildReport> {
  const recipe = RootfsRecipeSchema.parse(input);
  const tarball = cachedTarballPath(recipe);
  const started = Date.now();
  if (existsSync(tarball)) return { tarball, built: false, seconds: 0 };
  await fs.mkdir(recipe.cacheDir, { recursive: true });
  return withLock(`${tarball}.lock`, 30 * 60_000, async () => {
    if (existsSync(tarball)) return { tarball, built: false, seconds: (Date.now() - started) / 1000 };
    const work = await fs.mkdtemp(path.join(recipe.cacheDir, "build-"));
    const root = path.join(work, "root");
    try {
      const mirror = recipe.mirror ?? hostDebianMirror();
      await run(
        "debootstrap",
        [`--variant=${recipe.variant}`, `--include=${recipe.packages.join(",")}`, recipe.suite, root, mirror],
        { timeoutMs: 25 * 60_000 },
      );
      await postBuild(root, recipe);
      const partial = path.join(work, "rootfs.tar.zst");
      await run("tar", ["--numeric-owner", "-I", "zstd -T0 -3", "-cpf", partial, "-C", root, "."], {
        timeoutMs: 10 * 60_000,
      });
      await fs.rename(partial, tarball); // atomic: readers never see half a tarball
      return { tarball, built: true, seconds: (Date.now() - started) / 1000 };
    } finally {
      await fs.rm(work, { recursive: true, force: true });
    }
  });
}

/**
 * The recipe's tree, extracted once from its cached tarball into the cache folder beside it
 * (`<tarball name>.tree`), for test hosts to boot on an overlay of it (harness.ts): each boot then
 * writes only what it changes, where extracting the tarball for every host cost about 6 s of CPU
 * (tar 5.0 s, zstd 1.2 s) and removing the copy more. The tree is only ever read: it is a lower
 * layer. Extracted under a lock into a partial folder and renamed, so no boot sees half a tree.
 */
export async function ensureRootfsTree(input: Partial<RootfsRecipe> = {}): Promise<string> {
  const { tarball } = await ensureRootfsTarball(input);
  const tree = tarball.replace(/\.tar\.zst$/, ".tree");
  if (existsSync(tree)) return tree;
  return withLock(`${tree}.lock`, 10 * 60_000, async () => {
    if (existsSync(tree)) return tree;
    const dir = path.dirname(tree);
    // A partial extraction a killed run left: never renamed, so never used.
    for (const f of await fs.readdir(dir)) {
      if (f.startsWith(`${path.basename(tree)}.partial-`))
        await fs.rm(path.join(dir, f), { recursive: true, force: true });
    }
    const partial = `${tree}.partial-${process.pid}`;
    await fs.mkdir(partial);
    try {
      await run("tar", ["--numeric-owner", "-I", "zstd -T0", "-xpf", tarball, "-C", partial], {
        timeoutMs: 5 * 60_000,
      });
      await fs.rename(partial, tree);
    } finally {
      await fs.rm(partial, { recursive: true, force: true });
    }
    return tree;
  });
}

/** Makes a freshly bootstrapped tree a clean template that many containers can be copied from. */
async function postBuild(root: string, recipe: RootfsRecipe): Promise<void> {
  // downloaded .debs are only dead weight in the cache
  await run("chroot", [root, "apt-get", "clean"]);
  // an empty machine-id makes systemd mint a fresh one per boot, so copies never share an identity
  await fs.writeFile(path.join(root, "etc/machine-id"), "");
  await fs.rm(path.join(root, "var/lib/dbus/machine-id"), { force: true });
  // sshd host keys are regenerated per container by the harness; none baked into the template
  for (const f of await fs.readdir(path.join(root, "etc/ssh"))) {
    if (f.startsWith("ssh_host_")) await fs.rm(path.join(root, "etc/ssh", f));
  }
  if (!recipe.keepDebianSources) {
    await fs.rm(path.join(root, "etc/apt/sources.list"), { force: true });
    await fs.rm(path.join(root, "var/lib/apt/lists"), { recursive: true, force: true });
    await fs.mkdir(path.join(root, "var/lib/apt/lists/partial"), { recursive: true });
  }
  // a container has no consoles to manage, and apt's daily timers would take the dpkg lock in the
  // middle of a test's apt-get: these units only add failures and races to a test boot
  for (const unit of ["getty@tty1.service", "apt-daily.timer", "apt-daily-upgrade.timer", "e2scrub_reap.service"]) {
    await run("chroot", [root, "systemctl", "mask", unit]);
  }
  await fs.mkdir(path.join(root, "root/.ssh"), { recursive: true, mode: 0o700 });
}
