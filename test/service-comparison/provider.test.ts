/**
 * ServiceComparison's diff is what makes a re-run measure nothing: the units' stamps, the services,
 * the drafts, the endpoint and the plan are the cache key; anything else (a new connection, a new
 * key) updates the record without measuring, and a state from before the checkout's path left the
 * inputs (it held projectRoot) diffs clean.
 */
import { describe, expect, it } from "vitest";
import { check, diff, update } from "../../components/service-comparison/provider";
import { PULUMI_UNKNOWN } from "../../components/provider-helpers";

const inputs = {
  providerVersion: "1",
  connection: { kind: "local", root: "/r" },
  endpoint: { url: "http://127.0.0.1:30000", model: "tiny" },
  stamps: { autoregressive: "a".repeat(64), eagle3: "b".repeat(64) },
  serviceKinds: ["autoregressive", "eagle3"],
  drafts: { eagle3: { algorithm: "EAGLE3", draftModelPath: "d", acceptanceFloor: 1.5 } },
  plan: {
    plan: { concurrency: [1, 8], repeats: 1 },
    timeScale: 1,
    verifyPolicy: {},
    job: {},
    auto: true,
    restore: "autoregressive",
    acceptanceFloor: 1.5,
  },
  activateTimeoutSeconds: 720,
  deadlineSeconds: 3600,
};
const olds = { ...inputs, recommended: "eagle3", activeService: "eagle3", services: [{ service: "eagle3" }] };

describe("ServiceComparison provider", () => {
  it("nothing changed: no diff (key order does not count)", async () => {
    const reordered = { ...inputs, stamps: { eagle3: "b".repeat(64), autoregressive: "a".repeat(64) } };
    expect((await diff("id", olds, reordered)).changes).toBe(false);
  });

  it("a unit, the services, the workload or the policy changed: measured again (replace)", async () => {
    for (const [key, value] of [
      ["stamps", { ...inputs.stamps, eagle3: "c".repeat(64) }],
      ["serviceKinds", ["autoregressive"]],
      ["plan", { ...inputs.plan, plan: { ...inputs.plan.plan, concurrency: [1, 8, 16] } }],
      ["plan", { ...inputs.plan, plan: { ...inputs.plan.plan, certification: { require: false } } }],
      ["plan", { ...inputs.plan, auto: false }],
      ["drafts", { eagle3: { ...inputs.drafts.eagle3, acceptanceFloor: 2 } }],
    ] as const) {
      const d = await diff("id", olds, { ...inputs, [key]: value });
      expect(d.changes, key).toBe(true);
      expect(d.replaces, key).toEqual([key]);
    }
  });

  it("a new connection: an update that keeps the measurements", async () => {
    const news = { ...inputs, connection: { kind: "local", root: "/s" } };
    const d = await diff("id", olds, news);
    expect(d.changes).toBe(true);
    expect(d.replaces).toEqual([]);
    const { outs } = await update("id", olds, news);
    expect(outs).toMatchObject({
      connection: news.connection,
      recommended: "eagle3",
      services: [{ service: "eagle3" }],
    });
  });

  it("a state written when the checkout's path was an input (projectRoot) diffs clean and loses it", async () => {
    expect((await diff("id", { ...olds, projectRoot: "/old/checkout" }, inputs)).changes).toBe(false);
    const { outs } = await update("id", { ...olds, projectRoot: "/old/checkout" }, inputs);
    expect(outs).not.toHaveProperty("projectRoot");
  });

  it("check refuses an empty service list and non-positive deadlines, by property", async () => {
    expect((await check({}, inputs)).failures).toEqual([]);
    const r = await check({}, { ...inputs, serviceKinds: [], deadlineSeconds: 0 });
    expect(r.failures.map((f) => f.property)).toEqual(["serviceKinds", "deadlineSeconds"]);
    expect(r.failures.map((f) => f.reason)).toEqual([
      "serviceKinds must list at least one service to compare",
      "deadlineSeconds must be a positive number of seconds",
    ]);
    // A plan the gate cannot run is refused by its path; an input not known yet (preview) is not judged.
    const bad = await check({}, { ...inputs, plan: { ...inputs.plan, plan: { concurrency: [] } } });
    expect(bad.failures.map((f) => f.reason)).toEqual([expect.stringMatching(/^plan\.plan\.concurrency: /)]);
    const unknown = PULUMI_UNKNOWN;
    expect((await check({}, { ...inputs, stamps: { eagle3: unknown }, endpoint: unknown })).failures).toEqual([]);
  });
});
