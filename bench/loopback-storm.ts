/**
 * A storm of loopback connects, as another test file's benchmark or a CI job beside the suite makes:
 * 8 connect loops to one local server for SECONDS, each connection closed at once (every one leaves
 * a socket in TIME_WAIT). Run beside the self-connection tests to see them hold: they steer the
 * kernel's choice of source port, which such a storm moves on the machine's own loopback
 * (docs/development.md, sixth round: 207,125 connects in 15 s, 14,133 sockets in TIME_WAIT; the tests
 * before their private network namespace failed at once, after it they pass).
 *
 *   npm run tsx -- bench/loopback-storm.ts 15 & sleep 3; npx vitest run test/ports/self-connect.test.ts
 */
import { readFileSync } from "node:fs";
import * as net from "node:net";

const LOOPS = 8;

async function main(): Promise<void> {
  const seconds = Number(process.argv[2] ?? "15");
  if (!(seconds > 0 && seconds <= 600)) throw new Error(`SECONDS must be between 0 and 600, not ${process.argv[2]}`);
  const server = net.createServer((s) => s.destroy());
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as net.AddressInfo).port;
  const end = Date.now() + seconds * 1000;
  let connects = 0;
  const loop = async () => {
    while (Date.now() < end) {
      await new Promise<void>((resolve) => {
        const s = net.connect(port, "127.0.0.1", () => {
          connects++;
          s.end();
        });
        s.on("close", () => resolve());
        s.on("error", () => undefined);
      });
    }
  };
  await Promise.all(Array.from({ length: LOOPS }, loop));
  server.close();
  const timeWait = readFileSync("/proc/net/tcp", "utf8")
    .split("\n")
    .slice(1)
    .filter((l) => l.trim().split(/\s+/)[3] === "06").length;
  console.log(`${connects} loopback connects in ${seconds} s (${LOOPS} loops); ${timeWait} sockets in TIME_WAIT now`);
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exit(1);
});
