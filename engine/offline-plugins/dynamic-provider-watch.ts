/**
 * Preloaded (`node --require`) into @pulumi/pulumi's dynamic-provider host by the offline build's
 * launcher (engine/setup.sh): the host must leave when its engine is gone even before any provider
 * code ran in it (gpuhost's providers install the full process guard, gate/process-guard.ts, when
 * their code loads; then that guard leaves, after its cleanups, and this watch stays out of its way).
 */
const GUARD = Symbol.for("gpuhost.processGuard");

// Loaded once the host's main module runs, not during the preload: a module first loaded in a preload
// keeps `require.main` undefined for good, and the guard finds the host's grpc-js through it.
setImmediate(() => {
  void import("../../gate/transport/process-guard").then(({ watchEngine }) =>
    watchEngine({}, (why) => {
      if ((globalThis as unknown as Record<symbol, unknown>)[GUARD] !== undefined) return;
      process.stderr.write(`pulumi-resource-pulumi-nodejs: ${why}; stopping\n`);
      process.exit(1);
    }),
  );
});
