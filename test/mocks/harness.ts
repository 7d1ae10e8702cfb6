// The fast layer's harness: Pulumi's mocks (pulumi.runtime.setMocks) with a recorder of every
// registration, parent and dependency included (the mock monitor's newResource sees neither), so a
// mock test checks a component's resource graph and the arguments of each resource in milliseconds.
// What mocks cannot prove (the engine's serialization, a dynamic provider's methods, a script on a
// host) stays with the real-engine and test-host suites.
import * as pulumi from "@pulumi/pulumi";

export interface Registered {
  type: string;
  name: string;
  urn: string;
  /** URN of the parent ("" for a stack-level resource). */
  parent: string;
  /** URNs of the resources it waits for (dependsOn and inputs). */
  dependencies: string[];
  inputs: Record<string, unknown>;
}

interface RegisterRequest {
  getType(): string;
  getName(): string;
  getParent(): string;
  getDependenciesList(): string[];
}
interface MockMonitorLike {
  registerResource(req: RegisterRequest, callback: (err: unknown, res?: { getUrn(): string }) => void): Promise<void>;
}

/** What a mocked Command prints, by resource name: lets outputs parsed from stdout flow on. */
export type Stdout = (name: string) => string;

/**
 * Installs the mocks and the recorder. Call once per test file (vitest runs each file in its own
 * process, so the runtime starts clean).
 */
export function recordResources(
  stdout: Stdout = () => "",
  /** Extra state a mocked resource reports (a dynamic resource's outputs), by type and name. */
  outputs: (type: string, name: string) => Record<string, unknown> = () => ({}),
): {
  resources: Registered[];
  /** Waits until every registration so far has been answered. */
  settle(): Promise<Registered[]>;
} {
  const resources: Registered[] = [];
  const inputsByKey = new Map<string, Record<string, unknown>>();
  // setMocks is async only in name: it installs the mock monitor before it returns, which getMonitor()
  // below relies on, and a failure still surfaces as an unhandled rejection.
  void pulumi.runtime.setMocks(
    {
      newResource: (args) => {
        const inputs = args.inputs as Record<string, unknown>;
        inputsByKey.set(`${args.type}::${args.name}`, inputs);
        return {
          id: `${args.name}-id`,
          state: {
            ...inputs,
            stdout: stdout(args.name),
            // A StampKey's random key is its dynamic provider's output, which mocks never compute.
            ...(args.name.endsWith("-stamp-key") ? { key: "0".repeat(64) } : {}),
            ...outputs(args.type, args.name),
          },
        };
      },
      call: (args) => args.inputs as Record<string, unknown>,
    },
    "gpuhost",
    "mock",
    false,
  );
  const monitor = (pulumi.runtime as unknown as { getMonitor(): MockMonitorLike }).getMonitor();
  const register = monitor.registerResource.bind(monitor);
  monitor.registerResource = (req, callback) =>
    register(req, (err, res) => {
      if (res) {
        resources.push({
          type: req.getType(),
          name: req.getName(),
          urn: res.getUrn(),
          parent: req.getParent(),
          dependencies: req.getDependenciesList(),
          inputs: inputsByKey.get(`${req.getType()}::${req.getName()}`) ?? {},
        });
      }
      callback(err, res);
    });
  return {
    resources,
    async settle() {
      await (pulumi.runtime as unknown as { waitForRPCs(): Promise<void> }).waitForRPCs();
      return resources;
    },
  };
}

/** The one resource named `name`; throws listing the names when there is none. */
export function named(resources: Registered[], name: string): Registered {
  const found = resources.find((r) => r.name === name);
  if (!found) throw new Error(`no resource ${name}; registered: ${resources.map((r) => r.name).join(", ")}`);
  return found;
}

/** Names of the resources `r` depends on. */
export function dependencyNames(resources: Registered[], r: Registered): string[] {
  return r.dependencies.map((urn) => resources.find((x) => x.urn === urn)?.name ?? urn).sort();
}

/** The name of `r`'s parent. */
export function parentName(resources: Registered[], r: Registered): string | undefined {
  return resources.find((x) => x.urn === r.parent)?.name;
}

/** The value of an Output (mocks resolve them; unknowns never occur outside preview). */
export function valueOf<T>(o: pulumi.Output<T>): Promise<T> {
  return new Promise((resolve) => o.apply((v) => resolve(v)));
}

/** Pulumi's marker of a secret value in serialized inputs. */
const SECRET_SIG = "4dabf18193072939515e22adb298388d";
const SECRET_VALUE = "1b47061264138c4ac30d75fd1eb44270";

/** An input as the provider receives it: whether it is marked secret, and its value. */
export function unwrap(input: unknown): { secret: boolean; value: unknown } {
  if (typeof input === "object" && input !== null && (input as Record<string, unknown>)[SECRET_SIG] === SECRET_VALUE)
    return { secret: true, value: (input as { value: unknown }).value };
  return { secret: false, value: input };
}
