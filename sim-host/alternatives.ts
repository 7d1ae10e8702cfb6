#!/usr/bin/env node
// Simulated host: update-alternatives (--install, --set, --auto, --remove, --query, --display).
// Links are made as Debian makes them, <link> -> /etc/alternatives/<name> -> <path>, but with
// RELATIVE targets so they stay inside $GPUHOST_ROOT. State: var/lib/dpkg/alternatives/<name>.json.
import * as fs from "node:fs";
import * as path from "node:path";
import { fail, hostPath } from "./common";

interface Alternative {
  path: string;
  priority: number;
}

/** What the state file holds for one alternatives group. */
interface AlternativesState {
  link: string;
  status: "auto" | "manual";
  /** The path the group points at; set by --set, and by every apply. */
  value?: string;
  alternatives: Alternative[];
}

const stateFile = (name: string): string => hostPath(`/var/lib/dpkg/alternatives/${name}.json`);
const load = (name: string): AlternativesState | undefined =>
  fs.existsSync(stateFile(name))
    ? (JSON.parse(fs.readFileSync(stateFile(name), "utf8")) as AlternativesState)
    : undefined;
function save(name: string, st: AlternativesState): void {
  fs.mkdirSync(path.dirname(stateFile(name)), { recursive: true });
  fs.writeFileSync(stateFile(name), JSON.stringify(st, null, 1));
}

function relink(hostLink: string, hostTarget: string): void {
  const real = hostPath(hostLink);
  fs.mkdirSync(path.dirname(real), { recursive: true });
  const rel = path.relative(path.dirname(real), hostPath(hostTarget));
  const cur = fs.lstatSync(real, { throwIfNoEntry: false });
  if (cur?.isSymbolicLink() && fs.readlinkSync(real) === rel) return;
  if (cur && !cur.isSymbolicLink()) fail(`update-alternatives: error: not replacing ${hostLink} with a link`, 2);
  fs.rmSync(real, { force: true });
  fs.symlinkSync(rel, real);
}

const best = (st: AlternativesState): Alternative | undefined =>
  [...st.alternatives].sort((a, b) => b.priority - a.priority)[0];

function apply(name: string, st: AlternativesState): void {
  const value = st.status === "auto" ? best(st)?.path : st.value;
  if (!value) {
    fs.rmSync(hostPath(`/etc/alternatives/${name}`), { force: true });
    fs.rmSync(hostPath(st.link), { force: true });
    fs.rmSync(stateFile(name), { force: true });
    return;
  }
  st.value = value;
  relink(`/etc/alternatives/${name}`, value);
  relink(st.link, `/etc/alternatives/${name}`);
  save(name, st);
}

function query(name: string): number {
  const st = load(name) ?? fail(`update-alternatives: error: no alternatives for ${name}`, 2);
  const target = fs.lstatSync(hostPath(`/etc/alternatives/${name}`), { throwIfNoEntry: false })
    ? `/${path.relative(hostPath("/"), path.resolve(hostPath("/etc/alternatives"), fs.readlinkSync(hostPath(`/etc/alternatives/${name}`))))}`
    : "";
  const lines = [
    `Name: ${name}`,
    `Link: ${st.link}`,
    `Status: ${st.status}`,
    `Best: ${best(st)?.path ?? ""}`,
    `Value: ${target}`,
    "",
  ];
  for (const a of st.alternatives) lines.push(`Alternative: ${a.path}`, `Priority: ${a.priority}`, "");
  process.stdout.write(lines.join("\n"));
  return 0;
}

const argv = process.argv.slice(2).filter((a) => a !== "--quiet" && a !== "--force");
const [op, ...rest] = argv;
switch (op) {
  case "--install": {
    const [link, name, p, priority] = rest;
    if (!priority || !/^-?[0-9]+$/.test(priority))
      fail("update-alternatives: error: --install needs <link> <name> <path> <priority>", 2);
    if (!fs.existsSync(hostPath(p))) fail(`update-alternatives: error: alternative path ${p} doesn't exist`, 2);
    const st: AlternativesState = load(name) ?? { link, status: "auto", alternatives: [] };
    st.link = link;
    st.alternatives = st.alternatives.filter((a) => a.path !== p).concat({ path: p, priority: Number(priority) });
    apply(name, st);
    break;
  }
  case "--set": {
    const [name, p] = rest;
    const st = load(name) ?? fail(`update-alternatives: error: no alternatives for ${name}`, 2);
    if (!st.alternatives.some((a) => a.path === p))
      fail(`update-alternatives: error: alternative ${p} for ${name} not registered; not setting`, 2);
    st.status = "manual";
    st.value = p;
    apply(name, st);
    break;
  }
  case "--auto": {
    const st = load(rest[0]) ?? fail(`update-alternatives: error: no alternatives for ${rest[0]}`, 2);
    st.status = "auto";
    apply(rest[0], st);
    break;
  }
  case "--remove": {
    const [name, p] = rest;
    const st = load(name);
    if (!st) break;
    st.alternatives = st.alternatives.filter((a) => a.path !== p);
    if (st.value === p) st.status = "auto";
    apply(name, st);
    break;
  }
  case "--query":
  case "--display":
    process.exitCode = query(rest[0]);
    break;
  default:
    fail(`update-alternatives (simulated): unsupported ${argv.join(" ")}`, 2);
}
