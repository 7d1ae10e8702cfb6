/**
 * Router: SMG (SGLang's router, PyPI smg, pinned and hash-locked) on one host entry's machine, in
 * front of the hosts whose VerifiedGeneration passed in this update. Three host steps, through the
 * same host layer every component uses (components/host/script.ts):
 *
 *   install (venv + launcher) --\
 *   key file (stdin, 0600) -------+-> configure (unit, workers, restart when its stamp changed)
 *
 * The worker list is the stack's (declarative): it is rendered into the launcher's config, so a
 * router restart (which forgets workers registered at run time) comes back with it. The key reaches
 * smg through a systemd credential read by our launcher (launcher.py), never argv or Environment=.
 */
import * as pulumi from "@pulumi/pulumi";
import { type HostConnectionInput, hostScript } from "../host/script";
import { keyedApiKeyHash } from "../services/stamp-key";
import type { RouterConfig } from "./schema";
import { configureStep, hostCheck, installStep, keyFileStdin, keyFileStep, type RouterHostCheck } from "./steps";
import { urlOnHost } from "../services/endpoint";

/** One host behind the router, with its gate's outcome in this update. */
export interface RouterHost {
  name: string;
  /** The host's serving URL as the router reaches it (services/endpoint.ts urlSeenFrom). */
  url: string;
  /** VerifiedGeneration's `generating`: true once its gate passed. */
  generating: pulumi.Input<boolean | undefined>;
  /** Why the gate did not pass, when it did not. */
  failure?: pulumi.Input<string | undefined>;
}

export interface FleetWorkers {
  registered: Array<{ name: string; url: string }>;
  leftOut: Array<{ name: string; url: string; reason: string }>;
}

export interface RouterArgs {
  /** The router's machine (a host entry's connection). */
  connection: HostConnectionInput;
  router: RouterConfig;
  hosts: RouterHost[];
  /** The stack's API key, a secret: clients send it to the router, the router sends it to workers. */
  apiKey?: pulumi.Output<string>;
}

/** Which hosts become workers: exactly those whose gate passed (pure). */
export function fleetWorkers(
  hosts: Array<{ name: string; url: string; generating?: boolean; failure?: string }>,
): FleetWorkers {
  return {
    registered: hosts.filter((h) => h.generating === true).map(({ name, url }) => ({ name, url })),
    leftOut: hosts
      .filter((h) => h.generating !== true)
      .map(({ name, url, failure }) => ({
        name,
        url,
        reason: failure ?? "its readiness gate did not pass in this update",
      })),
  };
}

export class Router extends pulumi.ComponentResource {
  /** The fleet's endpoint as the router's machine sees it. */
  public readonly endpoint: pulumi.Output<string>;
  /** Prometheus metrics of the router (smg_*), as its machine sees them. */
  public readonly metricsEndpoint: pulumi.Output<string>;
  /** Hash of unit, launch config, requirements and launcher (no key): what the fleet was verified against. */
  public readonly identity: pulumi.Output<string>;
  public readonly workers: pulumi.Output<FleetWorkers>;
  public readonly smgVersion: pulumi.Output<string>;
  /** The configure step: FleetVerification runs after it. */
  public readonly configured: pulumi.Resource;
  /**
   * What the steps leave on the router's machine and their exact arguments, for FleetVerification's
   * probe and repair of that machine (components/fleet-verification/router-host.ts); no connection.
   */
  public readonly hostCheck: pulumi.Output<Omit<RouterHostCheck, "connection">>;

  constructor(name: string, args: RouterArgs, opts?: pulumi.ComponentResourceOptions) {
    super("gpuhost:index:Router", name, {}, opts);
    const { connection, router } = args;
    const installed = installStep(router);
    const install = hostScript(
      `${name}-install`,
      { connection, script: installed.script, args: installed.args },
      { parent: this },
    );
    const keyFile = args.apiKey ? keyFileCommand(name, connection, args.apiKey, this) : undefined;
    this.workers = workersOf(args.hosts);
    // A rotated key restarts the router too; keyed with the stack's secret, the stamp says nothing of it.
    const keyHash = keyedApiKeyHash(name, args.apiKey, this);
    const urls = this.workers.apply((w) => w.registered.map((r) => r.url));
    const apiKey = args.apiKey !== undefined;
    // Split as the values are known: the unit at once, the config and identity once the gates are
    // (neither holds a secret), the stamp once the key's keyed hash is (unsecret: it says nothing of it).
    const shape = configureStep(router, [], { apiKey, keyHash: "" });
    const withWorkers = urls.apply((u) => configureStep(router, u, { apiKey, keyHash: "" }));
    this.identity = withWorkers.apply((c) => c.identity);
    const configure = pulumi.unsecret(
      pulumi.all([urls, keyHash]).apply(([u, kh]) => configureStep(router, u, { apiKey, keyHash: kh })),
    );
    const stamp = configure.apply((c) => c.args[2]);
    this.hostCheck = configure.apply((c) => hostCheck(router, c));

    this.configured = hostScript(
      `${name}-configure`,
      {
        connection,
        script: shape.script,
        args: [shape.args[0], withWorkers.apply((c) => c.args[1]), stamp],
        deleteScript: shape.deleteScript,
      },
      { parent: this, dependsOn: [install, ...(keyFile ? [keyFile] : [])], deleteBeforeReplace: true },
    );

    this.endpoint = pulumi.output(urlOnHost(router.bind, router.port));
    this.metricsEndpoint = pulumi.output(`${urlOnHost(router.bind, router.prometheusPort)}/metrics`);
    this.smgVersion = install.stdout.apply((out) => /^smgVersion=(.*)$/m.exec(out)?.[1]?.trim() ?? "");
    this.registerOutputs({
      endpoint: this.endpoint,
      metricsEndpoint: this.metricsEndpoint,
      identity: this.identity,
      workers: this.workers,
      smgVersion: this.smgVersion,
    });
  }
}

/** The router's key file, written from the secret on stdin (0600); removed with the router. */
function keyFileCommand(
  name: string,
  connection: HostConnectionInput,
  apiKey: pulumi.Output<string>,
  parent: pulumi.Resource,
): ReturnType<typeof hostScript> {
  const keyStep = keyFileStep();
  return hostScript(
    `${name}-api-key-file`,
    {
      connection,
      script: keyStep.script,
      args: keyStep.args,
      stdin: pulumi.secret(apiKey.apply(keyFileStdin)),
      deleteScript: keyStep.deleteScript,
      deleteArgs: keyStep.deleteArgs,
    },
    { parent, deleteBeforeReplace: true },
  );
}

/** The hosts whose gate passed, and those left out with why, once every gate's outcome is known. */
function workersOf(hosts: RouterHost[]): pulumi.Output<FleetWorkers> {
  return pulumi
    .all(
      hosts.map((h) =>
        pulumi.all([h.generating, h.failure]).apply(([generating, failure]) => ({
          name: h.name,
          url: h.url,
          generating,
          failure,
        })),
      ),
    )
    .apply(fleetWorkers);
}
