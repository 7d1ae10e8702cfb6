#!/usr/bin/env node
// Runnable entry of the simulator as a server process (host units and the test host start it):
//   node dist/cli/sim-server.js --profile tiny --port 30000     or     npx tsx cli/sim-server.ts ...
import { simMain } from "./sim";

simMain(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`gpuhost sim: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  },
);
