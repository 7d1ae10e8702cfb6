/**
 * A setup file of every test file (vitest.config.ts): fails a test, or the file's hooks, that held its
 * worker's event loop for longer than BOUND_MS. A worker whose loop is blocked answers nothing: under
 * vitest 3 its RPC to the main process timed out after 60 s and a run with every test green exited 1
 * (the README's `npm test` on a loaded fresh machine); under any version it cannot enforce a test's
 * timeout, stop a leaked server or report progress meanwhile. The usual cause is a synchronous child
 * process (execFileSync, spawnSync) that takes minutes under load: run those with
 * test/support/run.ts's run() instead.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, afterEach, beforeAll } from "vitest";

/**
 * Half the 60 s that killed vitest 3's runs, and far above what a healthy test blocks for even on a
 * loaded machine (the longest measured in a whole run: docs/development.md). GPUHOST_EVENT_LOOP_BOUND_MS
 * sets another, for the guard's own test.
 */
export const BOUND_MS = Number(process.env.GPUHOST_EVENT_LOOP_BOUND_MS) || 30_000;

const TICK_MS = 20;
let lastTick = performance.now();
let longest = 0;
let worst = 0;
// A tick that comes late measures how long the loop stood still. (node:perf_hooks'
// monitorEventLoopDelay does the same, but records a stall only at its next tick, which an afterEach
// that runs straight after a blocking test has not seen yet: takeMax() adds the stall under way.)
const ticker = setInterval(() => {
  const now = performance.now();
  longest = Math.max(longest, now - lastTick - TICK_MS);
  lastTick = now;
}, TICK_MS);
ticker.unref();

/** The longest stall since the last call, the one that may have just ended included; restarts the measure. */
function takeMax(): number {
  const now = performance.now();
  const ms = Math.max(longest, now - lastTick - TICK_MS, 0);
  longest = 0;
  lastTick = now;
  return ms;
}

function check(what: string, ms: number): void {
  worst = Math.max(worst, ms);
  if (ms > BOUND_MS)
    throw new Error(
      `${what} blocked its vitest worker's event loop for ${(ms / 1000).toFixed(1)} s (bound ${BOUND_MS / 1000} s): ` +
        "run slow child processes with test/support/run.ts's run(), not execFileSync or spawnSync",
    );
}

// Loading the test file's modules (synchronous by nature) comes before the first hook: left out.
beforeAll(() => {
  takeMax();
});

afterEach((ctx) => {
  check(`the test "${ctx.task.name}"`, takeMax());
});

// vitest reads a hook's first parameter as its fixtures and wants an object pattern there.
// eslint-disable-next-line no-empty-pattern
afterAll(({}, suite) => {
  const ms = takeMax();
  clearInterval(ticker);
  worst = Math.max(worst, ms);
  // One line per file, for docs/development.md's figures (GPUHOST_EVENT_LOOP_LOG names the file).
  const log = process.env.GPUHOST_EVENT_LOOP_LOG;
  const file = path.relative(process.cwd(), "filepath" in suite ? suite.filepath : suite.name);
  if (log) fs.appendFileSync(log, `${Math.round(worst)}\t${file}\n`);
  check("a hook (beforeAll, afterAll) of this file", ms);
});
