/**
 * The provider object gpuhost's dynamic resources hand to Pulumi, and the one way their code is found.
 *
 * Why: closure serialization stores a dynamic resource's provider in the stack state, and refresh and
 * delete run that stored copy. A provider that held a path (the checkout's, as an input or captured)
 * broke as soon as the checkout moved: a stack made in one folder failed its next refresh from
 * another ("Cannot find module '<old folder>/dist/...'"). So the stored object holds no path and none
 * of gpuhost's code: each method finds gpuhost's compiled implementation when it runs and calls it.
 *
 * Where it looks: the engine starts the dynamic-provider host in the program's folder, and the host
 * runs from the program's own node_modules (<program>/node_modules/@pulumi/pulumi/cmd/dynamic-provider,
 * whose real path may lie elsewhere when node_modules is linked). Walking up from the program's folder
 * first, then from the host's, the first folder that is gpuhost itself (its
 * package.json is named gpuhost: gpuhost's own stacks) or holds node_modules/gpuhost (a program
 * that depends on gpuhost) is where the build is. Only what these functions capture is serialized:
 * IMPL (a path relative to that folder) and `locate`, which uses Node's own modules alone.
 */
import type * as pulumi from "@pulumi/pulumi";

/** The methods an implementation module exports as `provider` (dynamic-provider signatures). */
export type ProviderImpl = Pick<
  pulumi.dynamic.ResourceProvider,
  "check" | "diff" | "create" | "read" | "update" | "delete"
>;

/**
 * A provider whose every method loads `<gpuhost>/<impl>` (a compiled module exporting `provider`)
 * when it runs. IMPL: e.g. "dist/components/drift/provider-impl.js".
 */
export function callTimeProvider(impl: string): pulumi.dynamic.ResourceProvider {
  const locate = (): ProviderImpl => {
    /* eslint-disable @typescript-eslint/no-require-imports -- loaded when a method runs, never captured (see above) */
    const fs = require("fs") as typeof import("node:fs");
    const path = require("path") as typeof import("node:path");
    const named = (dir: string): boolean => {
      try {
        return (
          (JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")) as { name?: unknown }).name === "gpuhost"
        );
      } catch {
        return false;
      }
    };
    const starts = [process.cwd(), require.main?.filename ? path.dirname(require.main.filename) : ""].filter(Boolean);
    for (const start of starts) {
      for (let dir = path.resolve(start); ; dir = path.dirname(dir)) {
        for (const root of [dir, path.join(dir, "node_modules", "gpuhost")]) {
          const file = path.join(root, impl);
          if (named(root) && fs.existsSync(file)) return (require(file) as { provider: ProviderImpl }).provider;
        }
        if (path.dirname(dir) === dir) break;
      }
    }
    /* eslint-enable @typescript-eslint/no-require-imports */
    throw new Error(
      `gpuhost's compiled ${impl} was not found above ${starts.join(" or ")}: build gpuhost (npm run build) where the program runs`,
    );
  };
  // A method the implementation lacks behaves as the dynamic-provider host's default would.
  return {
    check: (olds, news) => {
      const p = locate();
      return p.check ? p.check(olds, news) : Promise.resolve({ inputs: news as unknown });
    },
    diff: (id, olds, news) => {
      const p = locate();
      return p.diff ? p.diff(id, olds, news) : Promise.resolve({});
    },
    create: (inputs) => locate().create(inputs),
    read: (id, props) => {
      const p = locate();
      return p.read ? p.read(id, props) : Promise.resolve({ id, props: props as unknown });
    },
    update: (id, olds, news) => {
      const p = locate();
      return p.update ? p.update(id, olds, news) : Promise.resolve({ outs: news as unknown });
    },
    delete: (id, props) => {
      const p = locate();
      return p.delete ? p.delete(id, props) : Promise.resolve();
    },
  };
}
