/**
 * Warnings on a resource, as upstream's provider reports them: through the engine's Log service, so
 * they show under the resource in `pulumi up`'s diagnostics (a provider's stderr reaches only the
 * engine's verbose log). Without an engine (unit tests) they go to stderr.
 */
import * as grpc from "@grpc/grpc-js";
// Types only (erased by tsc).
import type * as EngineGrpc from "@pulumi/pulumi/proto/engine_grpc_pb";
import type * as EnginePb from "@pulumi/pulumi/proto/engine_pb";

let engine: { log(req: unknown, cb: () => void): void } | undefined;

/** The engine's address, the first argument the engine starts a provider with (main.ts). */
export function connectEngine(address: string): void {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on first use, as before: without an engine (unit tests) this module loads no generated protos
  const enginerpc = require("@pulumi/pulumi/proto/engine_grpc_pb.js") as typeof EngineGrpc;
  engine = new enginerpc.EngineClient(address, grpc.credentials.createInsecure());
}

export function engineWarn(urn: string, message: string): Promise<void> {
  if (!engine) {
    process.stderr.write(`warning: ${message}\n`);
    return Promise.resolve();
  }
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on first use, as before: without an engine (unit tests) this module loads no generated protos
  const enginepb = require("@pulumi/pulumi/proto/engine_pb.js") as typeof EnginePb;
  const req = new enginepb.LogRequest();
  req.setSeverity(enginepb.LogSeverity.WARNING);
  req.setMessage(message);
  req.setUrn(urn);
  req.setEphemeral(false);
  return new Promise((resolve) => engine!.log(req, () => resolve()));
}
