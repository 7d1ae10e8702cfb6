#!/usr/bin/env node
// Simulated host: apt-get, dpkg and dpkg-query, with state inside $GPUHOST_ROOT.
// Packages come from "repositories" named in $GPUHOST_ROOT/etc/apt/sources.list.d/*.list; only
// file: URLs are reachable, resolved under $GPUHOST_ROOT, each holding package trees
// (<pkg>/DEBIAN/control + files) as components/cuda-catalog/catalog.ts writes them. The installed
// set is kept in dpkg's own formats: var/lib/dpkg/status stanzas and var/lib/dpkg/info/<pkg>.list.
// Compiled by `npm run build` to dist/sim-host/apt.js, which the sim-host/bin wrappers run.
import * as fs from "node:fs";
import * as path from "node:path";
import { type Stanza, fail, hostPath, parseStanzas, stanzaText } from "./common";

/** What `apt-get update` found: package name -> its tree and control stanza. */
type PackageIndex = Record<string, { tree: string; control: Stanza }>;

const statusFile = (): string => hostPath("/var/lib/dpkg/status");
const indexFile = (): string => hostPath("/var/lib/apt/lists/gpuhost-sim-index.json");
const listFile = (pkg: string): string => hostPath(`/var/lib/dpkg/info/${pkg}.list`);

function readStatus(): Map<string, Stanza> {
  if (!fs.existsSync(statusFile())) return new Map();
  return new Map(parseStanzas(fs.readFileSync(statusFile(), "utf8")).map((s) => [s.Package, s]));
}

function writeStatus(status: Map<string, Stanza>): void {
  const text = [...status.values()]
    .sort((a, b) => a.Package.localeCompare(b.Package))
    .map(stanzaText)
    .join("\n");
  fs.mkdirSync(path.dirname(statusFile()), { recursive: true });
  fs.writeFileSync(`${statusFile()}.new`, text);
  fs.renameSync(`${statusFile()}.new`, statusFile());
}

const dependsOf = (stanza: Stanza): string[] =>
  stanza.Depends
    ? stanza.Depends.split(",")
        .map((d) => d.trim().split(/\s/)[0])
        .filter(Boolean)
    : [];

interface Source {
  file: string;
  /** The `[key=value ...]` options of the line (trusted, signed-by). */
  opts: Record<string, string | undefined>;
  url: string;
  suite: string;
}

/** `deb [opts] URL suite [components]` lines from sources.list(.d). */
function sources(): Source[] {
  const files: string[] = [];
  if (fs.existsSync(hostPath("/etc/apt/sources.list"))) files.push(hostPath("/etc/apt/sources.list"));
  const dir = hostPath("/etc/apt/sources.list.d");
  if (fs.existsSync(dir))
    for (const f of fs.readdirSync(dir).sort()) if (f.endsWith(".list")) files.push(path.join(dir, f));
  const out: Source[] = [];
  for (const file of files) {
    for (const raw of fs.readFileSync(file, "utf8").split("\n")) {
      const line = raw.replace(/#.*/, "").trim();
      const m = /^deb\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)/.exec(line);
      if (!m) continue;
      const opts = Object.fromEntries(
        (m[1] || "")
          .split(/\s+/)
          .filter(Boolean)
          .map((o) => o.split("=")),
      ) as Source["opts"];
      out.push({ file, opts, url: m[2], suite: m[3] });
    }
  }
  return out;
}

function update(): number {
  const index: PackageIndex = {};
  let failed = false;
  for (const src of sources()) {
    if (!src.url.startsWith("file:")) {
      console.log(`Err:1 ${src.url} ${src.suite} InRelease`);
      console.error(`W: Failed to fetch ${src.url}: the simulated host reaches only file: repositories`);
      failed = true;
      continue;
    }
    if (src.opts.trusted !== "yes") {
      const keyring = src.opts["signed-by"];
      if (!keyring || !fs.existsSync(hostPath(keyring))) {
        console.error(`E: The repository '${src.url} ${src.suite} InRelease' is not signed.`);
        failed = true;
        continue;
      }
    }
    const base = path.join(
      hostPath(new URL(src.url).pathname),
      src.suite === "/" || src.suite === "./" ? "" : src.suite,
    );
    if (!fs.existsSync(base)) {
      console.error(`E: Failed to fetch ${src.url}/${src.suite}: File not found - ${base}`);
      failed = true;
      continue;
    }
    console.log(`Get:1 ${src.url} ${src.suite} InRelease`);
    for (const name of fs.readdirSync(base).sort()) {
      const control = path.join(base, name, "DEBIAN", "control");
      if (!fs.existsSync(control)) continue;
      const [stanza] = parseStanzas(fs.readFileSync(control, "utf8"));
      index[stanza.Package] = { tree: path.join(base, name), control: stanza };
    }
  }
  fs.mkdirSync(path.dirname(indexFile()), { recursive: true });
  fs.writeFileSync(indexFile(), JSON.stringify(index, null, 1));
  console.log("Reading package lists... Done");
  return failed ? 100 : 0;
}

function readIndex(): PackageIndex {
  return fs.existsSync(indexFile()) ? (JSON.parse(fs.readFileSync(indexFile(), "utf8")) as PackageIndex) : {};
}

/** Files of a package tree (not DEBIAN/), as host paths, parents first. */
function treeEntries(tree: string): { rel: string; st: fs.Stats }[] {
  const out: { rel: string; st: fs.Stats }[] = [];
  const walk = (rel: string): void => {
    for (const name of fs.readdirSync(path.join(tree, rel)).sort()) {
      if (rel === "" && name === "DEBIAN") continue;
      const r = path.posix.join(rel, name);
      const st = fs.lstatSync(path.join(tree, r));
      out.push({ rel: `/${r}`, st });
      if (st.isDirectory()) walk(r);
    }
  };
  walk("");
  return out;
}

function unpack(name: string, entry: PackageIndex[string], status: Map<string, Stanza>): void {
  const files: string[] = [];
  for (const { rel, st } of treeEntries(entry.tree)) {
    const dest = hostPath(rel);
    const src = path.join(entry.tree, rel);
    if (st.isDirectory()) {
      fs.mkdirSync(dest, { recursive: true });
    } else {
      fs.rmSync(dest, { force: true });
      if (st.isSymbolicLink()) {
        fs.symlinkSync(fs.readlinkSync(src), dest);
      } else {
        fs.copyFileSync(src, dest);
        fs.chmodSync(dest, st.mode & 0o7777);
      }
    }
    files.push(rel);
  }
  fs.mkdirSync(path.dirname(listFile(name)), { recursive: true });
  fs.writeFileSync(listFile(name), `${files.join("\n")}\n`);
  status.set(name, {
    Package: name,
    Status: "install ok installed",
    Version: entry.control.Version,
    Architecture: entry.control.Architecture,
    ...(entry.control.Depends ? { Depends: entry.control.Depends } : {}),
    Description: entry.control.Description,
  });
}

function install(names: string[], reinstall = false): number {
  const index = readIndex();
  for (const n of names) {
    if (!index[n]) return fail(`E: Unable to locate package ${n}`, 100);
  }
  const closure: string[] = [];
  const seen = new Set<string>();
  const visit = (n: string): void => {
    if (seen.has(n)) return;
    seen.add(n);
    if (!index[n]) return fail(`E: Unable to satisfy dependencies: ${n} is not available`, 100);
    dependsOf(index[n].control).forEach(visit);
    closure.push(n); // dependencies first, like dpkg's configure order
  };
  names.forEach(visit);
  const status = readStatus();
  const todo = closure.filter(
    (n) => status.get(n)?.Version !== index[n].control.Version || (reinstall && names.includes(n)),
  );
  for (const n of names)
    if (!todo.includes(n)) console.log(`${n} is already the newest version (${index[n].control.Version}).`);
  for (const n of todo) console.log(`Unpacking ${n} (${index[n].control.Version}) ...`);
  for (const n of todo) {
    unpack(n, index[n], status);
    writeStatus(status); // one package at a time, as dpkg records progress
    console.log(`Setting up ${n} (${index[n].control.Version}) ...`);
  }
  console.log(`0 upgraded, ${todo.length} newly installed, 0 to remove and 0 not upgraded.`);
  return 0;
}

function remove(names: string[]): number {
  const status = readStatus();
  // apt removes what depends on a removed package too (cuda-toolkit-13-0 goes with libcurand-dev-13-0).
  const doomed = new Set(names.filter((n) => status.has(n)));
  for (let grew = true; grew;) {
    grew = false;
    for (const [n, s] of status) {
      if (!doomed.has(n) && dependsOf(s).some((d) => doomed.has(d))) {
        doomed.add(n);
        grew = true;
      }
    }
  }
  for (const n of names) if (!status.has(n)) console.log(`Package '${n}' is not installed, so not removed`);
  for (const n of [...doomed].sort()) {
    const list = fs.existsSync(listFile(n)) ? fs.readFileSync(listFile(n), "utf8").split("\n").filter(Boolean) : [];
    for (const rel of list.reverse()) {
      const p = hostPath(rel);
      const st = fs.lstatSync(p, { throwIfNoEntry: false });
      if (!st) continue;
      if (st.isDirectory()) {
        if (fs.readdirSync(p).length === 0) fs.rmdirSync(p);
      } else {
        fs.rmSync(p, { force: true });
      }
    }
    fs.rmSync(listFile(n), { force: true });
    // Every doomed package came from the status map.
    console.log(`Removing ${n} (${status.get(n)!.Version}) ...`);
    status.delete(n);
  }
  writeStatus(status);
  console.log(`0 upgraded, 0 newly installed, ${doomed.size} to remove and 0 not upgraded.`);
  return 0;
}

function aptGet(argv: string[]): number {
  const words: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "-o" || argv[i] === "-c")
      i++; // option values: -o Dpkg::Lock::Timeout=600
    else if (!argv[i].startsWith("-")) words.push(argv[i]);
  }
  const [cmd, ...rest] = words;
  switch (cmd) {
    case "update":
      return update();
    case "install":
      return rest.length === 0 ? 0 : install(rest, argv.includes("--reinstall"));
    case "remove":
    case "purge":
    case "autoremove":
      return rest.length === 0 ? 0 : remove(rest);
    case "clean":
      return 0;
    default:
      return fail(`E: Invalid operation ${cmd ?? ""}`, 100);
  }
}

/** dpkg-query -W [-f FORMAT] [PATTERN...] | -s PKG | -L PKG */
function dpkgQuery(argv: string[]): number {
  let format = "${Package}\t${Version}\n";
  let mode: "show" | "status" | "list" | undefined;
  const patterns: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "-W" || a === "--show") mode = "show";
    else if (a === "-s" || a === "--status") mode = "status";
    else if (a === "-L" || a === "--listfiles") mode = "list";
    else if (a === "-f" || a === "--showformat") format = argv[++i];
    else if (a.startsWith("-f")) format = a.slice(2).replace(/^=/, "");
    else if (a.startsWith("--showformat=")) format = a.slice("--showformat=".length);
    else patterns.push(a);
  }
  const status = readStatus();
  const glob = (p: string): RegExp =>
    new RegExp(
      `^${p
        .replace(/[.+^${}()|[\]\\]/g, "\\$&")
        .replace(/\*/g, ".*")
        .replace(/\?/g, ".")}$`,
    );
  let code = 0;
  if (mode === "show") {
    const selected = patterns.length === 0 ? [...status.keys()] : [];
    for (const p of patterns) {
      const hits = [...status.keys()].filter((n) => glob(p).test(n));
      if (hits.length === 0) {
        console.error(`dpkg-query: no packages found matching ${p}`);
        code = 1;
      }
      selected.push(...hits);
    }
    const expand = (s: Stanza): string =>
      format
        .replace(/\\n/g, "\n")
        .replace(/\\t/g, "\t")
        .replace(/\$\{([A-Za-z:-]+)\}/g, (_m: string, k: string) => (k === "db:Status-Abbrev" ? "ii " : (s[k] ?? "")));
    // Every selected name is a key of the status map.
    process.stdout.write(
      [...new Set(selected)]
        .sort()
        .map((n) => expand(status.get(n)!))
        .join(""),
    );
    return code;
  }
  for (const p of patterns) {
    const s = status.get(p);
    if (!s) {
      console.error(`dpkg-query: package '${p}' is not installed and no information is available`);
      code = 1;
      continue;
    }
    if (mode === "list") process.stdout.write(fs.existsSync(listFile(p)) ? fs.readFileSync(listFile(p), "utf8") : "");
    else process.stdout.write(stanzaText(s));
  }
  return mode ? code : fail("dpkg-query: need an action option", 2);
}

function dpkg(argv: string[]): number {
  if (argv.includes("--configure")) return 0; // nothing is ever left half-configured here
  if (argv[0] === "-L" || argv[0] === "-s") return dpkgQuery(argv);
  if (argv[0] === "-S") {
    const wanted = argv[1];
    for (const f of fs.readdirSync(hostPath("/var/lib/dpkg/info")).filter((x) => x.endsWith(".list"))) {
      if (
        fs
          .readFileSync(hostPath(`/var/lib/dpkg/info/${f}`), "utf8")
          .split("\n")
          .includes(wanted)
      ) {
        console.log(`${f.slice(0, -5)}: ${wanted}`);
        return 0;
      }
    }
    return fail(`dpkg-query: no path found matching pattern ${wanted}`, 1);
  }
  return fail(`dpkg (simulated): unsupported ${argv.join(" ")}`, 2);
}

const [tool, ...argv] = process.argv.slice(2);
const handlers: Partial<Record<string, (argv: string[]) => number>> = {
  "apt-get": aptGet,
  apt: aptGet,
  dpkg,
  "dpkg-query": dpkgQuery,
};
const handler = handlers[tool];
process.exitCode = handler ? handler(argv) : fail(`unknown tool ${tool}`, 2);
