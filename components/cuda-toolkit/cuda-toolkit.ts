// CudaToolkit: the FULL CUDA toolkit (cuda-toolkit-13-0, never the nvcc-only subset), the
// repository it comes from, /usr/local/cuda pinned to it, and a verification that proves it by
// compiling (and on GPUs running) a curand+cublas program. Children, in provisioning order:
//   ${name}-repository -> ${name}-install -> ${name}-verify
import * as pulumi from "@pulumi/pulumi";
import type { DriftFragment } from "../drift/fragments";
import { TOOLKIT_FIELDS } from "../drift/repair";
import { type HostConnectionInput, hostScript, parseKeyValues } from "../host/script";
import { parsePackageVersions } from "./fingerprint";
import { type CudaToolkitOptionsInput, cudaToolkitOptionsSchema } from "./options";
import { type ToolkitPlan, toolkitPlan } from "./plan";
import { topologyFromVerify, type TopologyReport } from "./topology";

export interface CudaToolkitArgs extends CudaToolkitOptionsInput {
  /** The host to install on: whatever its platform, the same scripts run through this connection. */
  connection: HostConnectionInput;
  /** The serving venv: verify reports which nvcc its JIT consumers resolve and runs the proof against its CUDA libraries. */
  venvPath?: string;
}

/**
 * The scripts and arguments CudaToolkit runs for these options: the component's Commands are built
 * from exactly this plan, and ToolkitState re-runs its steps to repair drift. Pure.
 */
export function cudaToolkitPlan(options: CudaToolkitOptionsInput, venvPath?: string): ToolkitPlan {
  return toolkitPlan(cudaToolkitOptionsSchema.parse(options), venvPath);
}

/**
 * CudaToolkit's share of ToolkitState (components/drift): the release's packages, files, nvcc and
 * /usr/local/cuda, repaired by re-running its repository, install and verify steps as its Commands
 * run them.
 */
export function cudaToolkitDrift(plan: ToolkitPlan): DriftFragment {
  return {
    expected: { release: plan.release },
    repairs: [plan.repository, plan.install, plan.verify].map((step) => ({ fields: [...TOOLKIT_FIELDS], ...step })),
  };
}

export class CudaToolkit extends pulumi.ComponentResource {
  /** CUDA release installed, e.g. "13.0". */
  public readonly release: pulumi.Output<string>;
  /** The toolkit root: use as CUDA_HOME, and its bin/ first on PATH. */
  public readonly cudaHome: pulumi.Output<string>;
  /** nvcc's version as found through CUDA_HOME, e.g. "V13.0.88". */
  public readonly nvccVersion: pulumi.Output<string>;
  /** Installed package versions of the toolkit's dependency closure. */
  public readonly packageVersions: pulumi.Output<Record<string, string>>;
  /** Hash of release + sorted package versions: key for FlashInfer's JIT cache, compared by the drift probe. */
  public readonly fingerprint: pulumi.Output<string>;
  /** What the proof-by-execution step did ("ran: ...", "compiled and linked with nvcc 13.0.88; not run: no GPU", "skipped"). */
  public readonly proof: pulumi.Output<string>;
  /** The GPUs' PCIe links, topology and peer-to-peer bandwidth as verification found them ("not run: no GPU" without). */
  public readonly topology: pulumi.Output<TopologyReport>;
  /** Its share of ToolkitState: what it installed, and the steps that repair it (cudaToolkitDrift). */
  public readonly drift: DriftFragment;

  constructor(name: string, args: CudaToolkitArgs, opts?: pulumi.ComponentResourceOptions) {
    super("gpuhost:index:CudaToolkit", name, {}, opts);
    const { connection, venvPath, ...rest } = args;
    const options = cudaToolkitOptionsSchema.parse(rest);
    const plan = toolkitPlan(options, venvPath);

    const repository = hostScript(
      `${name}-repository`,
      {
        connection,
        script: plan.repository.script,
        args: plan.repository.args,
      },
      { parent: this },
    );

    const install = hostScript(
      `${name}-install`,
      {
        connection,
        script: plan.install.script,
        args: plan.install.args,
        deleteScript: options.removeOnDestroy ? plan.uninstall.script : undefined,
        deleteArgs: plan.uninstall.args,
        triggers: [repository.stdout.apply((s) => parseKeyValues(s).sources_list ?? "")],
      },
      { parent: this, dependsOn: [repository] },
    );

    const verify = hostScript(
      `${name}-verify`,
      {
        connection,
        script: plan.verify.script,
        args: plan.verify.args,
        // Re-verify whenever the install ran again.
        triggers: [install.stdout.apply((s) => parseKeyValues(s).cuda_link ?? "")],
      },
      { parent: this, dependsOn: [install] },
    );

    const result = verify.stdout.apply(parseKeyValues);
    this.release = pulumi.output(plan.release);
    this.cudaHome = pulumi.output(plan.root);
    this.nvccVersion = result.apply((r) => r.nvcc_version ?? "");
    this.packageVersions = result.apply((r) => parsePackageVersions(r.packages ?? ""));
    this.fingerprint = result.apply((r) => r.fingerprint ?? "");
    this.proof = result.apply((r) => r.proof ?? "");
    this.topology = result.apply((r) => topologyFromVerify(r, options.peerToPeerFloorGBps));
    this.drift = cudaToolkitDrift(plan);
    this.registerOutputs({
      release: this.release,
      cudaHome: this.cudaHome,
      nvccVersion: this.nvccVersion,
      packageVersions: this.packageVersions,
      fingerprint: this.fingerprint,
      proof: this.proof,
      topology: this.topology,
    });
  }
}
