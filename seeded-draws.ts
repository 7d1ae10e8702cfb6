// Seeded draws: the one random generator and the one request-length draw of the benchmark's workload
// shapes (gate/base/workload.ts) and the simulator's performance model (simulator/perf-model.ts), so a
// seed means the same sequence in both. No imports: the simulator bundle on a test host carries it.

/** A token count drawn per request: what the length schemas of gate/base/workload.ts and simulator/profile.ts parse to. */
export type LengthDistribution =
  | { distribution: "fixed"; tokens: number }
  | { distribution: "uniform"; min: number; max: number }
  | { distribution: "lognormal"; median: number; sigma: number; min: number; max: number };

/** mulberry32: small, fast, and the same sequence on every platform for a given seed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One length from DIST: fixed, uniform in min..max, or lognormal around its median clamped to min..max. */
export function drawLength(dist: LengthDistribution, random: () => number): number {
  switch (dist.distribution) {
    case "fixed":
      return dist.tokens;
    case "uniform":
      return dist.min + Math.floor(random() * (dist.max - dist.min + 1));
    case "lognormal": {
      // Box-Muller on two seeded uniforms; (1 - u) keeps log() away from 0.
      const u1 = 1 - random();
      const u2 = random();
      const normal = Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
      const value = Math.round(dist.median * Math.exp(dist.sigma * normal));
      return Math.min(dist.max, Math.max(dist.min, value));
    }
  }
}
