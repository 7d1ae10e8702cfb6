/**
 * The run test/testhost/contained.test.ts kills: vitest (vitest.contained.config.ts runs this file
 * alone) under engine/contain.sh, as `npm test` runs it, whose one test starts the real parts the
 * suite's fixtures start, the way they start them (a real sshd, SMG from its venv with a scrubbed
 * environment, llama.cpp's llama-server, a systemd-nspawn Debian host booted to systemd), writes into
 * $GPUHOST_CONTAINED_PARTS_OUT that they run, and then waits. It never stops them: the test kills
 * the runner with SIGKILL, so neither vitest's teardown nor any fixture's cleanup runs.
 */
import * as fs from "node:fs";
import { it } from "vitest";
import { startSshd } from "../support/sshd";
import { smgVenv, startRouter } from "../support/smg";
import { realServerInstall, startLlamaServer, waitHealthy } from "../real-server/llama-server";
import { bootTestHost } from "./harness";

/** What the test looks for once the run is gone, beside the processes it started. */
export interface ContainedParts {
  machineName: string;
  hostRoot: string;
  tmpdir: string;
}

it("starts sshd, SMG, llama-server and a test host, and waits to be killed", async () => {
  const out = process.env.GPUHOST_CONTAINED_PARTS_OUT;
  if (!out) throw new Error("GPUHOST_CONTAINED_PARTS_OUT names no file: run by test/testhost/contained.test.ts");
  await startSshd();
  await startRouter({ venv: smgVenv(), workerUrls: [] });
  await waitHealthy(await startLlamaServer(realServerInstall()));
  const host = await bootTestHost({ name: "contain" });
  const parts: ContainedParts = {
    machineName: host.machineName,
    hostRoot: host.rootDir,
    tmpdir: process.env.TMPDIR ?? "",
  };
  fs.writeFileSync(`${out}.new`, JSON.stringify(parts));
  fs.renameSync(`${out}.new`, out);
  await new Promise(() => undefined);
}, 3_600_000);
