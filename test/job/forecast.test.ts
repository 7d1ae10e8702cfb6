/**
 * The ETA, the verdict against the plan and the deadline verdict follow from a known throughput: the
 * story's figures (829 tok/s certified, 2,000-token completions) fed in, the arithmetic checked by hand.
 */
import { describe, expect, it } from "vitest";
import { forecast, RateWindow, type JobProgressCounts } from "../../job/forecast";

const DAY_MS = 86_400_000;
const now = Date.UTC(2026, 11, 1);

/** 100,000 of the story's 900,000 completions done, 2,000 tokens each, at TOKS tok/s. */
const counts = (toks: number): JobProgressCounts => ({
  total: 900_000,
  succeeded: 100_000,
  failed: 0,
  tokens: 100_000 * 2_000,
  outputBytes: 100_000 * 9_000,
  tokensPerSecond: toks,
});

describe("the job's forecast from a known throughput", () => {
  it("ETA = remaining completions x tokens each / tok/s; on plan within 5 % of the certified figure", () => {
    const f = forecast(counts(800), { certifiedTokensPerSecond: 829, hosts: 1, deadlineMs: null }, now);
    expect(f.remaining).toBe(800_000);
    // 800,000 x 2,000 / 800 = 2,000,000 s
    expect(f.etaSeconds).toBeCloseTo(2_000_000, 6);
    expect(f.planVerdict).toBe("on plan (829 tok/s measured by the stack)");
    expect(f.projectedOutputBytes).toBe(900_000 * 9_000);
    expect(f.deadline).toBeNull();
  });

  it("says how far below the certified figure the job runs", () => {
    const f = forecast(counts(622), { certifiedTokensPerSecond: 829, hosts: 1, deadlineMs: null }, now);
    expect(f.ofPlan).toBeCloseTo(0.75, 2);
    expect(f.planVerdict).toBe("25 % below the 829 tok/s the stack measured");
  });

  it("misses a deadline it cannot make, and names the hosts of the measured kind that make it", () => {
    // 1.6 B tokens left at 800 tok/s: 23.1 days; 10 days left -> 3 hosts (2.31 rounded up), 2 more.
    const f = forecast(counts(800), { certifiedTokensPerSecond: 829, hosts: 1, deadlineMs: now + 10 * DAY_MS }, now);
    expect(f.deadline).toEqual({ meets: false, daysLeft: 10, hostsNeeded: 3, moreHosts: 2 });
    expect(f.deadlineVerdict).toBe(
      "misses the deadline by 13.1 days: 2 more hosts of the measured kind (3 in all, 1 now)",
    );
  });

  it("makes a deadline it can, on the fleet it has", () => {
    // Two hosts at 1,600 tok/s together: 11.6 days; 12 days left.
    const f = forecast(counts(1600), { certifiedTokensPerSecond: 1658, hosts: 2, deadlineMs: now + 12 * DAY_MS }, now);
    expect(f.deadline?.meets).toBe(true);
    expect(f.deadline?.moreHosts).toBe(0);
    expect(f.deadlineVerdict).toBe("makes the deadline: 11.6 of 12.0 days left");
  });

  it("claims no ETA and no verdict before any rate", () => {
    const f = forecast(
      { ...counts(0), tokensPerSecond: null },
      { certifiedTokensPerSecond: 829, hosts: 1, deadlineMs: now + DAY_MS },
      now,
    );
    expect(f.etaSeconds).toBeNull();
    expect(f.deadline?.meets).toBe(false);
    expect(f.deadlineVerdict).toMatch(/no rate yet/);
  });

  it("the live rate is over the window: an early burst falls out of it", () => {
    const w = new RateWindow(60_000, 0);
    w.add(1_000, 100_000); // a burst in the first second
    for (let t = 2_000; t <= 120_000; t += 1_000) w.add(t, 100_000 + (t - 1_000) * 0.8);
    // The last 60 s ran at 800 tok/s (0.8 tokens per ms).
    expect(w.rate(120_000)).toBeCloseTo(800, 0);
  });

  it("holds at most two samples a thousandth of its window however many results come", () => {
    const w = new RateWindow(60_000, 0);
    // 200,000 results over 120 s, 1 token each: 1,666 tok/s, sampled every 0.6 ms.
    for (let i = 1; i <= 200_000; i++) w.add(i * 0.6, i);
    expect(w.held).toBeLessThanOrEqual(2_002);
    expect(w.rate(120_000)).toBeCloseTo(1_666.7, 0);
  });
});
