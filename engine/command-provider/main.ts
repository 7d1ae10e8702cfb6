/**
 * Entry point of pulumi-resource-command (see provider.ts for why gpuhost carries its own). The engine
 * starts it through the launcher engine/setup.sh writes beside the CLI; @pulumi/pulumi's provider
 * server speaks the gRPC ResourceProvider protocol and prints the port the engine connects to.
 */
import * as pulumi from "@pulumi/pulumi";
import { connectEngine } from "./log";
import { provider } from "./provider";

/** The SDK asks for this exact plugin version (@pulumi/command 1.2.1's package.json). */
export const VERSION = "1.2.1";

if (require.main === module) {
  // The engine's address (the first argument) carries the warnings this provider reports (log.ts).
  const engine = process.argv.slice(2).find((a) => !a.startsWith("-"));
  if (engine) connectEngine(engine);
  pulumi.provider.main({ version: VERSION, ...provider }, process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`pulumi-resource-command: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  });
}
