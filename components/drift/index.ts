// ToolkitState: a dynamic resource that records what the CUDA toolkit on a host really is after
// provisioning, and whose read re-probes it, so `pulumi refresh` shows exactly what drifted
// (@pulumi/command has no read: commands alone never notice a host changing under them).
//
// Closure serialization captures the provider object into the state (pulumi#6490: refresh runs
// the captured code). Each method therefore only require()s the compiled implementation by
// absolute path at call time; nothing else (no zod, no clients) is captured.
import * as pulumi from "@pulumi/pulumi";
import { projectRoot } from "../../project-files";
import type { HostConnectionInput } from "../host/script";
import type { Baseline, Drift, ExpectedState, ObservedState, OnDrift, RepairStepInput } from "./schema";
import { TOOLKIT_STATE_PROVIDER_VERSION } from "./version";

export { expectedToolkitState, type ExpectedToolkitOptions } from "./expected";
export { restartUnitStep, TOOLKIT_FIELDS, UNIT_FIELDS, unitContentField } from "./repair";
export type { Baseline, Drift, ExpectedState, ObservedState, OnDrift, RepairStep, RepairStepInput } from "./schema";

export interface ToolkitStateArgs {
  /** The host to probe. SSH connections are stored as a secret (they hold private keys). */
  connection: pulumi.Input<HostConnectionInput>;
  /**
   * What provisioning set up: toolkit version, CUDA_HOME, /usr/local/cuda target, package versions,
   * required files, rendered unit hashes, JIT cache key. Build it with `expectedToolkitState()`,
   * which takes the packages and files from the toolkit description.
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
  apiKeyFile?: { path: string; script: string };
  /** The gpuhost project root, whose dist/ holds the provider code. Default: found from this file. */
  projectRoot?: string;
}

// Each method loads the compiled implementation at call time: only `load`, `require` and this string
// are captured. `projectRoot` (an input, so it is in the state) says where the implementation lives.
// The types below are erased by tsc: nothing of provider-impl is captured.
const implPath = "dist/components/drift/provider-impl.js";
type Impl = typeof import("./provider-impl");
type Inputs = import("./provider-impl").ToolkitStateInputs;
type Outputs = import("./provider-impl").ToolkitStateOutputs;

function load(props: { projectRoot: string }): Impl {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- by absolute path at call time, never captured (see above)
  return require((require("path") as typeof import("node:path")).join(props.projectRoot, implPath)) as Impl;
}

const toolkitStateProvider: pulumi.dynamic.ResourceProvider<Inputs, Outputs> = {
  check: (olds, news) => load(news).check(olds, news),
  // A diff against a state written before projectRoot was an input still finds the code.
  diff: (id, olds, news) => load(news.projectRoot ? news : olds).diff(id, olds, news),
  create: (inputs) => load(inputs).create(inputs),
  // The SDK types read's `inputs` like its outputs; ours are the inputs (a subset), which is what the engine takes.
  read: async (id, props) => {
    const stored = props as Outputs;
    return (await load(stored).read(id, stored)) as unknown as pulumi.dynamic.ReadResult<Outputs>;
  },
  update: (id, olds, news) => load(news).update(id, olds, news),
  delete: (id, props) => load(props).remove(id, props),
};

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

  constructor(name: string, args: ToolkitStateArgs, opts?: pulumi.CustomResourceOptions) {
    const connection = pulumi
      .output(args.connection)
      .apply((c) => (c.kind === "ssh" ? pulumi.secret(c) : pulumi.output(c)));
    super(
      toolkitStateProvider,
      name,
      {
        projectRoot: args.projectRoot ?? projectRoot(),
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
      },
      { ...opts, additionalSecretOutputs: [...(opts?.additionalSecretOutputs ?? []), "connection", "apiKey"] },
      "gpuhost",
      "ToolkitState",
    );
  }
}
