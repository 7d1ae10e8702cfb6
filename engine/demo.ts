/**
 * `npm run demo`: `pulumi up` on the embedded default stack (`sim`), streaming the engine's progress,
 * then the stack outputs as JSON. The sim stack needs no GPU, no root and no systemd: it provisions a
 * simulated host under .gpuhost/, serves the SGLang simulator, verifies and benchmarks it; it runs on
 * the embedded backend with the documented passphrase. GPUHOST_STACK=<name> runs another stack of this
 * project instead, on the user's own backend and secrets provider.
 * `npm run demo -- --destroy` runs `pulumi destroy` on it instead (the service stops, units go).
 */
import { EMBEDDED_STACK, type EngineOptions, ensureStack, runPulumi, secretsProviderProblem } from "./pulumi";

async function main(): Promise<number> {
  const stack = process.env.GPUHOST_STACK ?? EMBEDDED_STACK;
  const opts: EngineOptions = { embedded: stack === EMBEDDED_STACK };
  const problem = opts.embedded ? undefined : secretsProviderProblem(stack, opts);
  if (problem) {
    process.stderr.write(`gpuhost demo: ${problem}\n`);
    return 2;
  }
  await ensureStack(stack, opts);
  const destroy = process.argv.includes("--destroy");
  const up = await runPulumi([destroy ? "destroy" : "up", "--yes", "--skip-preview", "--stack", stack], {
    ...opts,
    onOutput: (chunk) => process.stdout.write(chunk),
  });
  if (up.code !== 0) {
    process.stderr.write(`\npulumi ${destroy ? "destroy" : "up"} on stack ${stack} failed (exit ${up.code})\n`);
    return up.code;
  }
  if (destroy) return 0;
  const out = await runPulumi(["stack", "output", "--json", "--stack", stack], opts);
  process.stdout.write(`\nStack outputs (${stack}):\n${out.stdout}`);
  return out.code;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${(err as Error)?.stack ?? err}\n`);
    process.exit(2);
  },
);
