// ToolkitState: a dynamic resource that records what the CUDA toolkit on a host really is after
// provisioning, and whose read re-probes it, so `pulumi refresh` shows exactly what drifted
// (@pulumi/command has no read: commands alone never notice a host changing under them).
//
// Closure serialization captures the provider object into the state (pulumi#6490: refresh runs
// the captured code), so the provider is components/call-time-provider.ts's: it finds the compiled
// implementation (provider-impl.ts) when a method runs; no path and no code of ours is captured.
import * as pulumi from "@pulumi/pulumi";
import { callTimeProvider } from "../call-time-provider";
import type { HostConnectionInput } from "../host/script";
import type { Baseline, Drift, ExpectedState, ObservedState, OnDrift, RepairStepInput } from "./schema";
import { TOOLKIT_STATE_PROVIDER_VERSION } from "./version";

export { expectedToolkitState, type ExpectedToolkitOptions } from "./expected";
export { assembleDrift, preparationDrift, type AssembledDrift, type DriftFragment } from "./fragments";
export { restartUnitStep, TOOLKIT_FIELDS, UNIT_FIELDS, unitApiKeyField, unitContentField } from "./repair";
export type { Baseline, Drift, ExpectedState, ObservedState, OnDrift, RepairStep, RepairStepInput } from "./schema";

export interface ToolkitStateArgs {
  /** The host to probe. SSH connections are stored as a secret (they hold private keys). */
  connection: pulumi.Input<HostConnectionInput>;
  /**
   * What provisioning set up: toolkit version, CUDA_HOME, /usr/local/cuda target, package versions,
   * required files, rendered unit hashes, JIT cache key. Build it with `assembleDrift()` from the
   * components' fragments (or `expectedToolkitState()`), which take the packages and files from
   * the toolkit description.
   */
  expected: pulumi.Input<ExpectedState>;
  /**
   * "fail" (default): create/update fail when the host does not match `expected`. "record": only
   * record it. "repair": update (the next `pulumi up` after a refresh found drift) runs `repairs`
   * for what drifted, probes again, and fails naming what is still wrong; create fails as "fail".
   */
  onDrift?: pulumi.Input<OnDrift>;
  /**
   * The provisioning steps that repair drift, in order: each a host script of the repository with
   * its arguments exactly as the provisioning Command runs it (take them from the builders the
   * components export, never copies), and the drift-field prefixes it repairs. Run through the
   * same connection and quoting as the Commands (components/host/exec.ts). Stored in the state in
   * plain text: never put a secret in `args` or `env`.
   */
  repairs?: pulumi.Input<RepairStepInput[]>;
  /** The API key: its file on the host is compared with it on every probe, and rewritten by a repair. */
  apiKey?: pulumi.Input<string>;
  /** `credential`: the id the units load it as (LoadCredential=); systemd's copy is the key the service runs with. */
  apiKeyFile?: { path: string; script: string; credential?: string };
}

const toolkitStateProvider = callTimeProvider("dist/components/drift/provider-impl.js");

/**
 * The toolkit state of one host. Create it after provisioning (dependsOn the toolkit, environment
 * and unit resources). `pulumi refresh --preview-only --expect-no-changes` (or `gpuhost drift`)
 * then fails exactly when the host stopped matching, and names each field.
 */
export class ToolkitState extends pulumi.dynamic.Resource {
  /** Where the probe ran (never includes a key). */
  declare public readonly hostLabel: pulumi.Output<string>;
  /** The last probe's findings. */
  declare public readonly observed: pulumi.Output<ObservedState>;
  /** What create recorded that provisioning does not state: file hashes, driver, GPUs. */
  declare public readonly baseline: pulumi.Output<Baseline>;
  /** Fields in which the host differs from what was provisioned; empty when it matches. */
  declare public readonly drift: pulumi.Output<Drift[]>;
  /**
   * The activation id of the last start a repair made ("" before any): a repair that restarted the
   * service changes it, and VerifiedGeneration (which takes it as part of its `activation`) verifies again.
   */
  declare public readonly repairActivation: pulumi.Output<string>;

  constructor(name: string, args: ToolkitStateArgs, opts?: pulumi.CustomResourceOptions) {
    const connection = pulumi
      .output(args.connection)
      .apply((c) => (c.kind === "ssh" ? pulumi.secret(c) : pulumi.output(c)));
    super(
      toolkitStateProvider,
      name,
      {
        providerVersion: TOOLKIT_STATE_PROVIDER_VERSION,
        connection,
        expected: args.expected,
        onDrift: args.onDrift ?? "fail",
        repairs: args.repairs ?? [],
        apiKey: args.apiKey === undefined ? undefined : pulumi.secret(args.apiKey),
        apiKeyFile: args.apiKeyFile,
        hostLabel: undefined,
        observed: undefined,
        baseline: undefined,
        drift: undefined,
        repairActivation: undefined,
      },
      { ...opts, additionalSecretOutputs: [...(opts?.additionalSecretOutputs ?? []), "connection", "apiKey"] },
      "gpuhost",
      "ToolkitState",
    );
  }
}
