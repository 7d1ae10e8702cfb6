#!/usr/bin/env node
// Simulated host: systemctl and journalctl for units in $GPUHOST_ROOT/etc/systemd/system.
// `start` runs the unit's ExecStart (with Environment= and EnvironmentFile=) under a small
// detached supervisor that keeps the state systemd would: pid, ActiveState, NRestarts, a log
// (the "journal"), Restart=on-failure/always with RestartSec and StartLimitBurst, Conflicts=.
// Executables and PATH entries are looked up under the root first, so a unit written for a
// real host (/opt/gpuhost/venv/bin/python ...) runs the simulated host's files.
// State: run/gpuhost-sim/systemd/<unit>/; journal: var/log/gpuhost-sim/journal/<unit>.log.
import { type ChildProcessByStdio, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import type { Readable } from "node:stream";
import { errorText, fail, hostPath, root, shimDir } from "./common";
import { alive, withLock } from "./lock";

/** A parsed unit file: `Section.Key` -> every value given, in order. */
type Unit = Record<string, string[] | undefined>;

const unitName = (u: string): string => (/\.(service|target|timer|socket)$/.test(u) ? u : `${u}.service`);
const unitFile = (u: string): string => hostPath(`/etc/systemd/system/${u}`);
const stateDir = (u: string): string => hostPath(`/run/gpuhost-sim/systemd/${u}`);
const logFile = (u: string): string => hostPath(`/var/log/gpuhost-sim/journal/${u}.log`);
const readState = (u: string, key: string, dflt: string): string => {
  try {
    return fs.readFileSync(path.join(stateDir(u), key), "utf8").trim();
  } catch {
    return dflt;
  }
};
function writeState(u: string, key: string, value: string | number): void {
  fs.mkdirSync(stateDir(u), { recursive: true });
  fs.writeFileSync(path.join(stateDir(u), `${key}.new`), String(value));
  fs.renameSync(path.join(stateDir(u), `${key}.new`), path.join(stateDir(u), key));
}
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
function journal(u: string, line: string): void {
  fs.mkdirSync(path.dirname(logFile(u)), { recursive: true });
  fs.appendFileSync(logFile(u), line.endsWith("\n") ? line : `${line}\n`);
}

/** [Section] Key=value pairs; repeated keys accumulate (Environment=, Conflicts=). Uses the daemon-reload snapshot when there is one. */
function parseUnit(u: string): Unit | undefined {
  const loaded = path.join(stateDir(u), "loaded.unit");
  const file = fs.existsSync(loaded) ? loaded : unitFile(u);
  if (!fs.existsSync(file)) return undefined;
  const unit: Unit = {};
  let section = "";
  const text = fs.readFileSync(file, "utf8").replace(/\\\n/g, " ");
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#") || line.startsWith(";")) continue;
    const sec = /^\[(.+)\]$/.exec(line);
    if (sec) {
      section = sec[1];
      continue;
    }
    const kv = /^([A-Za-z]+)\s*=\s*(.*)$/.exec(line);
    if (kv) (unit[`${section}.${kv[1]}`] ??= []).push(kv[2]);
  }
  return unit;
}
function last(unit: Unit, key: string, dflt: string): string;
function last(unit: Unit, key: string, dflt?: string): string | undefined;
function last(unit: Unit, key: string, dflt?: string): string | undefined {
  const values = unit[key];
  return values ? values[values.length - 1] : dflt;
}

/** systemd's word splitting: quotes and backslash escapes. */
function splitWords(s: string): string[] {
  const words: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"|'([^']*)'|((?:[^\s"'\\]|\\.)+)/g;
  let m: RegExpExecArray | null;
  // Exactly one group matches: double-quoted, single-quoted or bare.
  while ((m = re.exec(s)))
    words.push(m[1] !== undefined ? m[1].replace(/\\(.)/g, "$1") : (m[2] ?? m[3].replace(/\\(.)/g, "$1")));
  return words;
}

function seconds(v: string | undefined, dflt: number): number {
  if (v === undefined) return dflt;
  if (v === "infinity") return Infinity;
  const m = /^([0-9.]+)\s*(ms|s|sec|min|m)?$/.exec(v.trim());
  if (!m) return dflt;
  const n = Number(m[1]);
  return m[2] === "ms" ? n / 1000 : m[2] === "min" || m[2] === "m" ? n * 60 : n;
}

function environmentOf(unit: Unit): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = {};
  for (const spec of unit["Service.EnvironmentFile"] ?? []) {
    const optional = spec.startsWith("-");
    const p = hostPath(optional ? spec.slice(1) : spec);
    if (!fs.existsSync(p)) {
      if (optional) continue;
      throw new Error(`Failed to load environment files: ${spec}`);
    }
    for (const line of fs.readFileSync(p, "utf8").split("\n")) {
      const m = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
      if (m) env[m[1]] = m[2].replace(/^"(.*)"$/, "$1").replace(/^'(.*)'$/, "$1");
    }
  }
  for (const spec of unit["Service.Environment"] ?? []) {
    for (const w of splitWords(spec)) {
      const i = w.indexOf("=");
      if (i > 0) env[w.slice(0, i)] = w.slice(i + 1);
    }
  }
  return env;
}

function loadCredentials(specs: string[], dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
  if (specs.length === 0) return;
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  for (const spec of specs) {
    const i = spec.indexOf(":");
    const id = i > 0 ? spec.slice(0, i) : spec;
    const source = i > 0 ? spec.slice(i + 1) : "";
    if (!/^[A-Za-z0-9_.-]+$/.test(id) || !source.startsWith("/")) throw new Error(`invalid LoadCredential=${spec}`);
    const from = hostPath(source);
    if (!fs.existsSync(from)) throw new Error(`${source}: No such file or directory`);
    fs.copyFileSync(from, path.join(dir, id));
    fs.chmodSync(path.join(dir, id), 0o400);
  }
}

const underRoot = (p: string): string => (p.startsWith("/") && fs.existsSync(hostPath(p)) ? hostPath(p) : p);

// ---- the supervisor: one detached process per started unit ----
async function supervise(u: string): Promise<void> {
  const unit = parseUnit(u);
  // start() checked the unit exists; it can only vanish in between.
  if (!unit) throw new Error(`Unit ${u} not found.`);
  const policy = last(unit, "Service.Restart", "no");
  const restartSec = seconds(last(unit, "Service.RestartSec"), 0.1);
  const burst = Number(last(unit, "Unit.StartLimitBurst", last(unit, "Service.StartLimitBurst", "5")));
  const interval = seconds(last(unit, "Unit.StartLimitIntervalSec", last(unit, "Service.StartLimitIntervalSec")), 10);
  let child: ChildProcessByStdio<null, Readable, Readable> | undefined;
  let stopping = false;
  process.on("SIGTERM", () => {
    stopping = true;
    if (child && alive(child.pid)) child.kill("SIGTERM");
    setTimeout(() => {
      if (child && alive(child.pid)) child.kill("SIGKILL");
    }, 5000).unref();
  });
  // The root folder vanishing (a test cleaning up) ends the service too.
  setInterval(() => {
    if (!fs.existsSync(stateDir(u))) process.kill(process.pid, "SIGTERM");
  }, 1000).unref();
  const starts: number[] = [];
  for (;;) {
    const env = environmentOf(unit);
    const unitPath = (env.PATH ?? "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin").split(":");
    env.PATH = [
      process.env.GPUHOST_SIM_SHIMS,
      ...unitPath.flatMap((p) => (fs.existsSync(hostPath(p)) ? [hostPath(p), p] : [p])),
    ]
      .filter(Boolean)
      .join(":");
    env.GPUHOST_ROOT = root();
    env.HOME ??= process.env.HOME ?? "/";
    // LoadCredential=ID:PATH, as systemd does it: each file copied into the unit's own credentials
    // folder (%d, $CREDENTIALS_DIRECTORY), readable by the service only; a missing file fails the start.
    const credDir = hostPath(`/run/credentials/${u}`);
    const credentials = unit["Service.LoadCredential"] ?? [];
    try {
      loadCredentials(credentials, credDir);
    } catch (err) {
      journal(u, `${u}: Failed to set up credentials: ${(err as Error).message}`);
      journal(u, `${u}: Main process exited, code=exited, status=243/CREDENTIALS`);
      writeState(u, "result", "exit-code");
      writeState(u, "state", "failed");
      return;
    }
    if (credentials.length) env.CREDENTIALS_DIRECTORY = credDir;
    const words = splitWords((last(unit, "Service.ExecStart", "") ?? "").replace(/^[-@+!:]+/, "")).map((w) =>
      w
        // specifiers (systemd.unit(5)): %% is a literal %, %d the credentials folder
        .replace(/%([%d])/g, (_m: string, c: string) => (c === "%" ? "%" : credDir))
        .replace(
          /\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
          (_m: string, a: string | undefined, b: string | undefined) => env[a ?? b ?? ""] ?? "",
        ),
    );
    const exe = words[0] ? underRoot(words[0]) : "";
    const wd = last(unit, "Service.WorkingDirectory");
    starts.push(Date.now());
    if (!exe || !fs.existsSync(exe)) {
      journal(u, `${u}: Failed to locate executable ${words[0] ?? "(none)"}: No such file or directory`);
      journal(u, `${u}: Main process exited, code=exited, status=203/EXEC`);
      writeState(u, "result", "exit-code");
      writeState(u, "state", "failed");
      return;
    }
    // The process runs "on the host": an absolute path in its arguments that exists under the root
    // (/opt/gpuhost-sim/dist/simulator/sglang.js, linked there by the preparation) is that file.
    const proc = spawn(exe, words.slice(1).map(underRoot), {
      env,
      cwd: wd ? underRoot(wd) : root(),
      stdio: ["ignore", "pipe", "pipe"],
    });
    child = proc;
    proc.stdout.on("data", (b: Buffer) => fs.appendFileSync(logFile(u), b));
    proc.stderr.on("data", (b: Buffer) => fs.appendFileSync(logFile(u), b));
    // spawn() leaves pid undefined only when the exec fails; String() writes "undefined" as before.
    writeState(u, "main.pid", String(proc.pid));
    writeState(u, "state", "active");
    writeState(u, "spawned", 1);
    journal(u, `Started ${u}.`);
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((r) =>
      proc.on("close", (c, s) => r([c, s])),
    );
    if (stopping) {
      journal(u, `Stopped ${u}.`);
      writeState(u, "state", "inactive");
      return;
    }
    const failed = code !== 0;
    journal(
      u,
      `${u}: Main process exited, code=${signal ? "killed" : "exited"}, status=${signal ?? `${code}/${failed ? "FAILURE" : "SUCCESS"}`}`,
    );
    // Node gives "close" a code or a signal, never neither.
    writeState(u, "exit.status", signal ? 128 : String(code));
    const again = policy === "always" || (policy === "on-failure" && failed);
    if (!again) {
      writeState(u, "result", failed ? "exit-code" : "success");
      writeState(u, "state", failed ? "failed" : "inactive");
      return;
    }
    if (starts.filter((t) => Date.now() - t < interval * 1000).length >= burst) {
      journal(u, `${u}: Start request repeated too quickly.`);
      journal(u, `${u}: Failed with result 'start-limit-hit'.`);
      writeState(u, "result", "start-limit-hit");
      writeState(u, "state", "failed");
      return;
    }
    writeState(u, "state", "activating");
    await sleep(restartSec * 1000);
    if (stopping) {
      writeState(u, "state", "inactive");
      return;
    }
    const n = Number(readState(u, "restarts", "0")) + 1;
    writeState(u, "restarts", n);
    journal(u, `${u}: Scheduled restart job, restart counter is at ${n}.`);
  }
}

// The manager's lock (sim-host/lock.ts): commands that change state run one at a time.
const withManagerLock = <T>(fn: () => Promise<T>): Promise<T> =>
  withLock(hostPath("/run/gpuhost-sim/systemd.lock"), fn);

// ---- systemctl ----
function activeState(u: string): string {
  const state = readState(u, "state", "inactive");
  if ((state === "active" || state === "activating") && !alive(Number(readState(u, "supervisor.pid", "0"))))
    return "failed";
  return state;
}

async function stop(u: string): Promise<void> {
  const pid = Number(readState(u, "supervisor.pid", "0"));
  if (alive(pid)) {
    process.kill(pid, "SIGTERM");
    for (let i = 0; i < 200 && alive(pid); i++) await sleep(50);
  }
  if (fs.existsSync(stateDir(u)) && activeState(u) !== "failed") writeState(u, "state", "inactive");
}

async function start(u: string): Promise<number> {
  const unit = parseUnit(u);
  if (!unit) return fail(`Failed to start ${u}: Unit ${u} not found.`, 5);
  // A timer is started (active) but never fires here: the simulated host runs no clock of systemd's.
  if (u.endsWith(".timer")) {
    writeState(u, "state", "active");
    return 0;
  }
  // Active, or activating under a live supervisor (starting, or waiting to restart): the unit
  // already has its one supervisor; a second would run a second copy of the service.
  const state = activeState(u);
  if (state === "active") return 0;
  if (state === "activating" && alive(Number(readState(u, "supervisor.pid", "0")))) return 0;
  // Conflicts= works both ways: stop what this unit names and what names this unit.
  const others = fs.readdirSync(hostPath("/etc/systemd/system")).filter((f) => f.endsWith(".service") && f !== u);
  for (const o of others) {
    const theirs = (parseUnit(o)?.["Unit.Conflicts"] ?? []).flatMap((c) => c.split(/\s+/));
    const mine = (unit["Unit.Conflicts"] ?? []).flatMap((c) => c.split(/\s+/));
    if ((mine.includes(o) || theirs.includes(u)) && ["active", "activating"].includes(activeState(o))) await stop(o);
  }
  writeState(u, "restarts", 0);
  writeState(u, "state", "activating");
  fs.rmSync(path.join(stateDir(u), "result"), { force: true });
  fs.rmSync(path.join(stateDir(u), "spawned"), { force: true });
  fs.mkdirSync(path.dirname(logFile(u)), { recursive: true });
  const out = fs.openSync(logFile(u), "a");
  // The supervisor is this same compiled file; the services it starts get the shim wrappers on PATH.
  // Inside the root, naming it "." (see root()): a folder moved while the unit runs keeps it running.
  const sup = spawn(process.execPath, [__filename, "__supervise", u], {
    detached: true,
    cwd: root(),
    stdio: ["ignore", out, out],
    env: { ...process.env, GPUHOST_ROOT: ".", GPUHOST_SIM_SHIMS: shimDir() },
  });
  // A supervisor that failed to spawn has no pid: "undefined" is written, which reads as not alive.
  writeState(u, "supervisor.pid", String(sup.pid));
  sup.unref();
  // Type=simple: start returns once the main process is spawned; only a failure to spawn it
  // (203/EXEC) fails the start job. A crash afterwards is the unit's business, as in systemd.
  const spawned = (): boolean => readState(u, "spawned", "") !== "";
  for (let i = 0; i < 250 && !spawned() && readState(u, "result", "") === ""; i++) await sleep(20);
  if (!spawned()) {
    return fail(
      `Job for ${u} failed because the control process exited with error code.\nSee "systemctl status ${u}" and "journalctl -xeu ${u}" for details.`,
      1,
    );
  }
  return 0;
}

function wantsLinks(u: string): string[] {
  const unit = parseUnit(u) ?? {};
  return (unit["Install.WantedBy"] ?? [])
    .flatMap((w) => w.split(/\s+/))
    .map((t) => hostPath(`/etc/systemd/system/${t}.wants/${u}`));
}
const isEnabled = (u: string): boolean => wantsLinks(u).some((l) => fs.lstatSync(l, { throwIfNoEntry: false }));

const subStates: Partial<Record<string, string>> = {
  active: "running",
  activating: "auto-restart",
  failed: "failed",
  inactive: "dead",
};

function show(u: string, props: string[], valueOnly: boolean): number {
  const values: Partial<Record<string, string>> = {
    ActiveState: activeState(u),
    NRestarts: readState(u, "restarts", "0"),
    MainPID: activeState(u) === "active" ? readState(u, "main.pid", "0") : "0",
    SubState: subStates[activeState(u)],
    LoadState: fs.existsSync(unitFile(u)) ? "loaded" : "not-found",
    UnitFileState: isEnabled(u) ? "enabled" : "disabled",
    Result: readState(u, "result", "success"),
    ExecMainStatus: readState(u, "exit.status", "0"),
    Id: u,
  };
  for (const p of props.length ? props : Object.keys(values))
    console.log(valueOnly ? `${values[p] ?? ""}` : `${p}=${values[p] ?? ""}`);
  return 0;
}

async function systemctl(argv: string[]): Promise<number> {
  const props: string[] = [];
  const flags = new Set<string>();
  const words: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "-p" || a === "--property") props.push(...argv[++i].split(","));
    else if (a.startsWith("--property=")) props.push(...a.slice(11).split(","));
    else if (a.startsWith("-")) flags.add(a);
    else words.push(a);
  }
  const [cmd, ...units] = words;
  const changes = ["daemon-reload", "start", "stop", "restart", "enable", "disable", "reset-failed"];
  if (changes.includes(cmd))
    return withManagerLock(() => systemctlCommand(cmd, units.map(unitName), flags, props, argv));
  return systemctlCommand(cmd, units.map(unitName), flags, props, argv);
}

async function systemctlCommand(
  cmd: string,
  us: string[],
  flags: Set<string>,
  props: string[],
  argv: string[],
): Promise<number> {
  let code = 0;
  switch (cmd) {
    case "daemon-reload":
      for (const f of fs.readdirSync(hostPath("/etc/systemd/system"))) {
        // A unit file removed while listing (by a script not under the lock) is simply gone.
        if (!/\.(service|target)$/.test(f) || !fs.statSync(unitFile(f), { throwIfNoEntry: false })?.isFile()) continue;
        fs.mkdirSync(stateDir(f), { recursive: true });
        try {
          fs.copyFileSync(unitFile(f), path.join(stateDir(f), "loaded.unit"));
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
        }
      }
      return 0;
    case "start":
      for (const u of us) code ||= await start(u);
      return code;
    case "stop":
      for (const u of us) await stop(u);
      return 0;
    case "restart":
      for (const u of us) {
        await stop(u);
        code ||= await start(u);
      }
      return code;
    case "enable":
    case "disable":
      for (const u of us) {
        if (!fs.existsSync(unitFile(u))) return fail(`Failed to ${cmd} unit: Unit file ${u} does not exist.`, 1);
        for (const l of wantsLinks(u)) {
          fs.rmSync(l, { force: true });
          if (cmd === "enable") {
            fs.mkdirSync(path.dirname(l), { recursive: true });
            fs.symlinkSync(`../${u}`, l);
          }
        }
        if (flags.has("--now")) code ||= cmd === "enable" ? await start(u) : (await stop(u), 0);
      }
      return code;
    case "is-active":
    case "is-failed": {
      // A line a unit; systemctl(1): exit 0 when at least one unit is in the state asked about, else
      // is-active 3 (program is not running), is-failed 1.
      const [want, otherwise] = cmd === "is-active" ? (["active", 3] as const) : (["failed", 1] as const);
      let any = false;
      for (const u of us) {
        const s = activeState(u);
        if (!flags.has("--quiet") && !flags.has("-q")) console.log(s);
        any ||= s === want;
      }
      return any ? 0 : otherwise;
    }
    case "is-enabled": {
      // A line a unit whose file exists; exit 0 when at least one is enabled (systemctl(1)).
      let any = false;
      for (const u of us) {
        if (!fs.existsSync(unitFile(u))) {
          console.error(`Failed to get unit file state for ${u}: No such file or directory`);
          continue;
        }
        const e = isEnabled(u);
        console.log(e ? "enabled" : "disabled");
        any ||= e;
      }
      return any ? 0 : 1;
    }
    case "show":
      for (const u of us) show(u, props, flags.has("--value"));
      return 0;
    case "reset-failed":
      for (const u of us) if (activeState(u) === "failed") writeState(u, "state", "inactive");
      return 0;
    case "status":
      for (const u of us) {
        console.log(`* ${u}\n     Active: ${activeState(u)}`);
        if (activeState(u) !== "active") code = 3;
      }
      return code;
    case "cat":
      for (const u of us) process.stdout.write(fs.readFileSync(unitFile(u), "utf8"));
      return 0;
    default:
      return fail(`systemctl (simulated): unsupported ${argv.join(" ")}`, 1);
  }
}

function journalctl(argv: string[]): number {
  let lines = Infinity;
  const units: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "-u" || a === "--unit") units.push(unitName(argv[++i]));
    else if (a.startsWith("--unit=")) units.push(unitName(a.slice(7)));
    else if (a === "-n" || a === "--lines") lines = Number(argv[++i]);
    else if (a.startsWith("--lines=")) lines = Number(a.slice(8));
    else if (/^-n[0-9]+$/.test(a)) lines = Number(a.slice(2));
    else if (["-o", "--output", "--since", "--until"].includes(a)) i++;
  }
  for (const u of units) {
    const all = fs.existsSync(logFile(u))
      ? fs
          .readFileSync(logFile(u), "utf8")
          .split("\n")
          .filter((l) => l !== "")
      : [];
    const shown = Number.isFinite(lines) ? all.slice(Math.max(0, all.length - lines)) : all;
    if (shown.length === 0) console.log("-- No entries --");
    else process.stdout.write(`${shown.join("\n")}\n`);
  }
  return 0;
}

const [tool, ...args] = process.argv.slice(2);
const tools: Partial<Record<string, (argv: string[]) => number | Promise<number> | Promise<void>>> = {
  systemctl,
  journalctl,
  __supervise: (a) => supervise(unitName(a[0])),
};
const run = tools[tool] ?? fail(`unknown tool ${tool}`, 2);
Promise.resolve(run(args)).then(
  (code) => {
    if (typeof code === "number") process.exitCode = code;
  },
  (e: unknown) => fail(errorText(e), 1),
);
