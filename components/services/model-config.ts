/**
 * Reads the served model's config.json on the host (scripts/model-config.sh), so the stack can say
 * where the measured throughput stands against the host's roofline (physics/outputs.ts) from the
 * model's own facts rather than from a copy the user keeps by hand.
 */
import * as pulumi from "@pulumi/pulumi";
import { hostScript, parseKeyValues, type HostConnectionInput } from "../host/script";

export interface ModelConfigArgs {
  connection: HostConnectionInput;
  /** services.modelPath: a folder on the host, or a repository id in the service user's cache. */
  modelPath: string;
  /** The service user's home (its Hugging Face cache). */
  serviceHome: string;
}

/**
 * The script's key=value lines: found and config (base64), or missing, or toolarge. Read once per
 * model path (the script's triggers), after the service answered: a repository id is only in the
 * cache once SGLang downloaded it.
 */
export function readModelConfig(
  name: string,
  args: ModelConfigArgs,
  opts: pulumi.CustomResourceOptions,
): pulumi.Output<Record<string, string>> {
  const read = hostScript(
    name,
    {
      connection: args.connection,
      script: "components/services/scripts/model-config.sh",
      args: [args.modelPath, args.serviceHome],
    },
    opts,
  );
  return read.stdout.apply(parseKeyValues);
}
