/**
 * `npm run demo`: `pulumi up` on the embedded default stack (`sim`), streaming the engine's progress,
 * then the stack outputs as JSON. The sim stack needs no GPU, no root and no systemd: it provisions a
 * simulated host under .gpuhost/, serves the SGLang simulator, verifies and benchmarks it.
 * `npm run demo -- --destroy` runs `pulumi destroy` on it instead (the service stops, units go).
 */
import { ensureStack, runPulumi } from "./pulumi";

async function main(): Promise<number> {
  const stack = process.env.GPUHOST_STACK ?? "sim";
  await ensureStack(stack);
  const destroy = process.argv.includes("--destroy");
  const up = await runPulumi([destroy ? "destroy" : "up", "--yes", "--skip-preview", "--stack", stack], {
    onOutput: (chunk) => process.stdout.write(chunk),
  });
  if (up.code !== 0) {
    process.stderr.write(`\npulumi ${destroy ? "destroy" : "up"} on stack ${stack} failed (exit ${up.code})\n`);
    return up.code;
  }
  if (destroy) return 0;
  const out = await runPulumi(["stack", "output", "--json", "--stack", stack]);
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
