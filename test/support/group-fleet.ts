// The groups of a mixed fleet for tests (issue 29): tiny simulators behind the real SMG. Apart from
// smg.ts, which the benches import too, because it registers vitest hooks.
import { afterEach } from "vitest";
import { loadProfile, startSimulator, type RunningSimulator } from "../../simulator/index";
import { withSpeculative } from "../../simulator/profile";
import { QUICK_ROUTER, type RunningRouter, smgVenv, startRouter, waitForHealthyWorkers } from "./smg";

/**
 * The groups of a mixed fleet on this machine: tiny simulators, each EAGLE-3 or autoregressive
 * under a served name, and the real SMG in front of them (QUICK_ROUTER). Call at a test file's top
 * level: everything started is stopped after each test.
 */
export function groupFleet(timeScale: number) {
  const sims: RunningSimulator[] = [];
  let router: RunningRouter | null = null;
  afterEach(async () => {
    await router?.stop();
    router = null;
    await Promise.all(sims.splice(0).map((s) => s.close()));
  });
  return {
    async sim(service: "eagle3" | "autoregressive", servedModelName: string): Promise<RunningSimulator> {
      const profile =
        service === "eagle3"
          ? withSpeculative(loadProfile("tiny"), { algorithm: "EAGLE3", draftModelPath: "sim/tiny-eagle3" })
          : "tiny";
      const s = await startSimulator({ profile, servedModelName, port: 0, timeScale, log: () => undefined });
      sims.push(s);
      return s;
    },
    /** Stops a simulator the fleet started (a host going away). */
    async stop(s: RunningSimulator): Promise<void> {
      sims.splice(sims.indexOf(s), 1);
      await s.close();
    },
    /** SMG in front of WORKERS, once every one of them is healthy there. */
    async router(workerUrls: string[], policy?: string): Promise<RunningRouter> {
      router = await startRouter({ venv: smgVenv(), workerUrls, policy, extraConfig: QUICK_ROUTER });
      await waitForHealthyWorkers(router.url, workerUrls.length);
      return router;
    },
  };
}
