// ToolkitState checks and repairs what the components provisioned. Each component exports its
// share (its fields of the expected state and the steps that repair them, built from the same
// plans its Commands run); this assembles the shares in provisioning order. No Pulumi import.
import { expectedToolkitState, type ExpectedToolkitOptions } from "./expected";
import { TOOLKIT_FIELDS } from "./repair";
import type { ExpectedState, RepairStepInput } from "./schema";

/** One component's share of ToolkitState: its fields of the expected state, the steps that repair them. */
export interface DriftFragment {
  /** Its fields of the expected state (the toolkit names the release). */
  expected?: Partial<ExpectedToolkitOptions>;
  /** Its repair steps, in the order its provisioning runs them. */
  repairs?: RepairStepInput[];
}

/** What ToolkitState is given: the expected state and the repair steps, in provisioning order. */
export interface AssembledDrift {
  expected: ExpectedState;
  repairs: RepairStepInput[];
}

/**
 * The expected state and repairs of a host from its components' fragments, given in provisioning
 * order: the steps run in that order, and exactly one fragment names the toolkit release.
 */
export function assembleDrift(fragments: readonly DriftFragment[]): AssembledDrift {
  const options = fragments.reduce<Partial<ExpectedToolkitOptions>>((all, f) => ({ ...all, ...f.expected }), {});
  const { release } = options;
  if (release === undefined) throw new Error("no drift fragment names the toolkit release");
  return {
    expected: expectedToolkitState({ ...options, release }),
    repairs: fragments.flatMap((f) => f.repairs ?? []),
  };
}

/** A platform's preparation step (components/platform.ts), run first when the toolkit drifted. */
export function preparationDrift(step: { script: string; args: string[] } | undefined): DriftFragment {
  return step ? { repairs: [{ fields: [...TOOLKIT_FIELDS], ...step }] } : {};
}
