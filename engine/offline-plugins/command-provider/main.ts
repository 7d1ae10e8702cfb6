/**
 * Entry point of pulumi-resource-command (see provider.ts for why gpuhost carries its own). The engine
 * starts it through the launcher engine/setup.sh writes beside the CLI; @pulumi/pulumi's provider
 * server speaks the gRPC ResourceProvider protocol and prints the port the engine connects to.
 */
// The provider server alone, not the whole SDK (its automation API, runtime and closure serializer):
// the engine starts this plugin twice in every refreshing `pulumi up`, and the SDK's index cost each
// start about 0.14 s of CPU more (this file loads in 0.18 s of CPU instead of 0.32 s, 2-core machine).
import { main } from "@pulumi/pulumi/provider";
import { engineAddress, hookEngineCancel, watchEngine } from "../../../gate/transport/process-guard";
import { connectEngine } from "./log";
import { killRunningCommands, provider } from "./provider";

/** The SDK asks for this exact plugin version (@pulumi/command 1.2.1's package.json). */
export const VERSION = "1.2.1";

if (require.main === module) {
  // The engine's address (the last host:port argument; the engine may pass the program's folder
  // before it) carries the warnings this provider reports (log.ts).
  const address = engineAddress(process.argv);
  if (address) connectEngine(`${address.host}:${address.port}`);
  // After `kill -9` of pulumi nothing stops a plugin: it, and the command it runs, would stay for
  // good (PPID 1). Leave within about 2 s of the engine's going, and when the engine stops this
  // plugin (SIGINT, SIGTERM), taking the running commands' process groups along.
  const leave = (why: string, code: number) => {
    killRunningCommands();
    process.stderr.write(`pulumi-resource-command: ${why}; stopping\n`);
    process.exit(code);
  };
  watchEngine({}, (why) => leave(why, 1));
  process.on("SIGINT", () => leave("interrupted (SIGINT)", 130));
  process.on("SIGTERM", () => leave("terminated (SIGTERM)", 143));
  // The first Ctrl-C to `pulumi up` reaches the engine alone, which then waits for the operations in
  // flight: a running command is stopped, and its step fails, so the update ends within seconds.
  hookEngineCancel(() => killRunningCommands());
  main({ version: VERSION, ...provider }, process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`pulumi-resource-command: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  });
}
