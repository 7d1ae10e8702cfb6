/**
 * A duration as the text reports print it: milliseconds below a second, with three significant
 * digits, so a per-token latency of 0.3 ms never reads "0.000 s" or "0 ms" (issue 25 point 7).
 */
export function duration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return "n/a";
  if (seconds >= 1) return `${seconds.toFixed(2)} s`;
  if (seconds === 0) return "0 ms";
  return `${(seconds * 1000).toPrecision(3)} ms`;
}
