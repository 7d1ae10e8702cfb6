/**
 * An error a person reads as it is: the Node.js SDK's runner prints a RunError's message alone (no
 * "failed with an unhandled exception" preamble, no stack, no colour codes), and the engine then adds
 * nothing of its own. Its message cannot be rewritten: the SDK's serializer prefixes
 * `error serializing property "x": ` to a rejected input's error each time another resource or
 * property awaits it, which buried a refusal under the property path (`serviceIdentity`, then
 * `connection` ten times).
 */
import * as pulumi from "@pulumi/pulumi";

export class PlainError extends pulumi.RunError {
  constructor(message: string) {
    super(message);
    this.name = "PlainError";
    Object.defineProperty(this, "message", {
      get: () => message,
      set: () => undefined,
      enumerable: false,
      configurable: true,
    });
  }
}
