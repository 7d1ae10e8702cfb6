/**
 * Warnings on a resource, as upstream's provider reports them: through the engine's Log service, so
 * they show under the resource in `pulumi up`'s diagnostics (a provider's stderr reaches only the
 * engine's verbose log). Without an engine (unit tests) they go to stderr.
 */
import * as grpc from "@grpc/grpc-js";

let engine: { log(req: unknown, cb: () => void): void } | undefined;

/** The engine's address, the first argument the engine starts a provider with (main.ts). */
export function connectEngine(address: string): void {
  const enginerpc = require("@pulumi/pulumi/proto/engine_grpc_pb.js");
  engine = new enginerpc.EngineClient(address, grpc.credentials.createInsecure());
}

export function engineWarn(urn: string, message: string): Promise<void> {
  if (!engine) {
    process.stderr.write(`warning: ${message}\n`);
    return Promise.resolve();
  }
  const enginepb = require("@pulumi/pulumi/proto/engine_pb.js");
  const req = new enginepb.LogRequest();
  req.setSeverity(enginepb.LogSeverity.WARNING);
  req.setMessage(message);
  req.setUrn(urn);
  req.setEphemeral(false);
  return new Promise((resolve) => engine!.log(req, () => resolve()));
}
