import { performance } from "node:perf_hooks";

/**
 * Simulated time. With time scale X the simulation runs X times faster than the wall clock:
 * one wall second is X simulated seconds. Every duration the server reports is simulated time,
 * so a client multiplies what it measures on the wall clock by X to get the hardware's figures.
 */
export class SimClock {
  private readonly wallStart = performance.now();

  constructor(readonly timeScale: number) {
    if (!(timeScale > 0) || !Number.isFinite(timeScale))
      throw new Error(`time scale must be a positive number, got ${timeScale}`);
  }

  /** Simulated seconds since start. */
  now(): number {
    return ((performance.now() - this.wallStart) * this.timeScale) / 1000;
  }

  wallSeconds(): number {
    return (performance.now() - this.wallStart) / 1000;
  }

  /** Wall milliseconds that `simSeconds` take. */
  toWallMs(simSeconds: number): number {
    return (simSeconds * 1000) / this.timeScale;
  }

  private readonly pending = new Set<NodeJS.Timeout>();

  /** Run `fn` after `simSeconds` of simulated time (never, if the clock is stopped first). */
  after(simSeconds: number, fn: () => void): NodeJS.Timeout {
    const timer = setTimeout(
      () => {
        this.pending.delete(timer);
        fn();
      },
      Math.max(0, Math.min(2 ** 31 - 1, this.toWallMs(simSeconds))),
    );
    this.pending.add(timer);
    return timer;
  }

  /** Cancel every pending `after`, so a closed simulator leaves no timer keeping the process alive. */
  stop(): void {
    for (const t of this.pending) clearTimeout(t);
    this.pending.clear();
  }
}
