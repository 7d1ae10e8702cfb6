/**
 * One simulated host with several SGLang services sharing its GPUs, in process: `activate(argv)`
 * stops the running server and starts the stand-in sglang with that command line on the same port,
 * as `systemctl start` of a unit with Conflicts= does on a host. The demo and the comparison tests
 * use it to switch between the units' real rendered command lines without a Pulumi stack.
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { startSimulator, type RunningSimulator } from "./index";
import { parseSglangArgs } from "./sglang-args";
import { profileFor } from "./sglang";

export interface SwitchableHostOptions {
  /**
   * Run each server as its own process (default), as on a host: the client measuring it then does
   * not share an event loop with it. false: in this process (no compiled code needed).
   */
  separateProcess?: boolean;
  /** The host's profile (GPUHOST_SIM_PROFILE of its units). */
  profile: string;
  timeScale: number;
  faults?: string[];
  /** Every model load takes this many simulated seconds (GPUHOST_SIM_LOAD_SECONDS); absent: the profile's range. */
  loadSeconds?: number;
  log?: (line: string) => void;
}

export class SwitchableSimHost {
  private current: RunningSimulator | null = null;
  private child: ChildProcess | null = null;
  private currentArgv: string[] | null = null;
  /** Times a server was started (a re-run that changed nothing starts none). */
  starts = 0;

  constructor(private readonly opts: SwitchableHostOptions) {}

  /** The command line now running, or null. */
  get active(): string[] | null {
    return this.currentArgv;
  }

  /** Runs `argv` (SGLang's flags) unless it already runs; returns when the new process is started. */
  async activate(argv: string[]): Promise<void> {
    if (this.currentArgv && this.currentArgv.join("\0") === argv.join("\0")) return;
    await this.stop();
    const args = parseSglangArgs(argv);
    const env = {
      GPUHOST_SIM_PROFILE: this.opts.profile,
      GPUHOST_SIM_FAULTS: (this.opts.faults ?? []).join(","),
      GPUHOST_SIM_TIME_SCALE: String(this.opts.timeScale),
      ...(this.opts.loadSeconds === undefined ? {} : { GPUHOST_SIM_LOAD_SECONDS: String(this.opts.loadSeconds) }),
    };
    const chosen = profileFor(args, env);
    if (this.opts.separateProcess !== false) {
      this.child = spawnStandin(argv, env, this.opts.log);
      this.currentArgv = argv;
      this.starts++;
      return;
    }
    this.current = await startSimulator({
      profile: chosen.profile,
      faults: chosen.faults,
      host: args.host,
      port: args.port,
      timeScale: this.opts.timeScale,
      apiKey: args.api_key,
      servedModelName: args.served_model_name ?? args.model_path,
      openPortAfterLoad: true,
      skipWarmup: args.skip_server_warmup,
      log: this.opts.log ?? (() => undefined),
      onExit: () => {
        this.current = null;
        this.currentArgv = null;
      },
    });
    this.currentArgv = argv;
    this.starts++;
  }

  async stop(): Promise<void> {
    const running = this.current;
    const child = this.child;
    this.current = null;
    this.child = null;
    this.currentArgv = null;
    if (running) await running.close();
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
    }
  }
}

/** The stand-in as a process: compiled when this file is, else through tsx from the sources. */
function spawnStandin(argv: string[], env: Record<string, string>, log?: (line: string) => void): ChildProcess {
  const compiled = path.join(__dirname, "sglang.js");
  const [cmd, pre] = fs.existsSync(compiled)
    ? [process.execPath, [compiled]]
    : [path.join(__dirname, "..", "node_modules", ".bin", "tsx"), [path.join(__dirname, "sglang.ts")]];
  const child = spawn(cmd, [...pre, ...argv], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  child.stderr.on("data", (d: Buffer) => {
    for (const line of d.toString().split("\n")) if (line) log?.(line);
  });
  return child;
}
