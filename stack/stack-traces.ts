/**
 * The program's stack traces mapped by Node itself, not by source-map-support.
 *
 * Why: the SDK's program host (`@pulumi/pulumi/cmd/run`) installs source-map-support, and the SDK
 * takes a whole stack trace (Error.stackTraceLimit = Infinity) for every resource it registers, to
 * record where the resource was declared. source-map-support maps every frame of every one of those
 * traces in JavaScript: 0.5 of the program's 2.1 s of CPU in an `up` that changes nothing, and every
 * `up` and preview runs the program (docs/development.md, "Fourth round"). Node's own source maps
 * map the same frames to the same TypeScript lines for a fifth of that, so a user's stack trace still
 * names index.ts, not dist/index.js.
 */
export function useNodeSourceMaps(): void {
  process.setSourceMapsEnabled(true);
  // Node formats (and maps) a stack itself when no prepareStackTrace is installed.
  (Error as { prepareStackTrace?: unknown }).prepareStackTrace = undefined;
}
