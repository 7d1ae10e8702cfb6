/**
 * Warnings on a resource, as upstream's provider reports them: through the engine's Log service, so
 * they show under the resource in `pulumi up`'s diagnostics (a provider's stderr reaches only the
 * engine's verbose log). Outside the engine (unit tests) they go to stderr.
 */
export function engineWarn(urn: string, message: string): Promise<void> {
  // required lazily: the runtime settings read the engine address the provider was started with
  const settings = require("@pulumi/pulumi/runtime/settings");
  const enginepb = require("@pulumi/pulumi/proto/engine_pb.js");
  const engine = settings.hasEngine() ? settings.getEngine() : undefined;
  if (!engine) {
    process.stderr.write(`warning: ${message}\n`);
    return Promise.resolve();
  }
  const req = new enginepb.LogRequest();
  req.setSeverity(enginepb.LogSeverity.WARNING);
  req.setMessage(message);
  req.setUrn(urn);
  req.setEphemeral(false);
  return new Promise((resolve) => engine.log(req, () => resolve()));
}
