/**
 * operations.driftCheck as the program composes it: the drift check on a schedule, on the machine
 * it names (a host's machine, the simulated one included: then rendered into its folder, where no
 * timer fires; the router's; this machine; or an operations machine of its own).
 */
import * as pulumi from "@pulumi/pulumi";
import { connectionOf, type ComposedHost, type StackContext } from "./hosts";
import { DriftCheck, resolveDriftCheck } from "../components/drift-check";
import type { HostConnectionInput } from "../components/host/script";

export function driftCheckOf(ctx: StackContext, hosts: ComposedHost[]): DriftCheck | undefined {
  const driftCheck = ctx.config.operations.driftCheck;
  if (!driftCheck) return undefined;
  const { machine, ...settings } = driftCheck;
  const onHost = (name: string) => {
    const h = hosts.find((x) => x.name === name);
    if (!h) throw new Error(`operations.driftCheck: no host ${name}`);
    return h.fleetHost.connection;
  };
  const connection: HostConnectionInput =
    machine.kind === "local"
      ? { kind: "local" }
      : machine.kind === "router"
        ? onHost(ctx.config.router!.host)
        : machine.kind === "host"
          ? onHost(machine.name)
          : connectionOf(ctx, { name: "drift-check", connection: machine }, "gpuhost:operations.driftCheck.machine");
  return new DriftCheck(
    "drift-check",
    { connection, check: resolveDriftCheck(settings, { stack: pulumi.getStack(), projectDir: ctx.root }) },
    // A check scheduled before the hosts are provisioned and verified would only report them missing.
    { dependsOn: hosts.map((h) => h.fleetHost.verification) },
  );
}
