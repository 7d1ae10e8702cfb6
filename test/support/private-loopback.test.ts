// test/support/private-loopback.ts: the function really runs in a network namespace of its own (a
// port this process listens on is free there, and no socket of the machine's shows), and a child
// that never answers is killed at its bound, leaving no process behind.
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { inPrivateLoopback, privateLoopbackAvailable } from "./private-loopback";
import { alive, until } from "./processes";
import { socketsOnPort } from "./self-connect";

const CASES = path.join(__dirname, "private-loopback.cases.ts");

describe.runIf(privateLoopbackAvailable())("a private loopback", () => {
  it("does not see the machine's sockets: a port listened on here is free there", async () => {
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as net.AddressInfo).port;
    try {
      expect(socketsOnPort(port)).not.toEqual([]); // so the check below could fail
      const { result, isolated } = await inPrivateLoopback<{ sockets: string[]; listenable: boolean }>(
        CASES,
        "portSeen",
        [port],
        30_000,
      );
      expect(isolated).toBe(true);
      expect(result).toEqual({ sockets: [], listenable: true });
    } finally {
      await new Promise((r) => server.close(r));
    }
  }, 40_000);

  it("kills a child that never answers at its bound, and says so", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "private-loopback-"));
    const pidFile = path.join(dir, "pid");
    try {
      const started = Date.now();
      await expect(inPrivateLoopback(CASES, "hang", [pidFile], 3_000)).rejects.toThrow(
        /^hang in a private network namespace: /,
      );
      expect(Date.now() - started).toBeLessThan(10_000);
      const pid = Number(fs.readFileSync(pidFile, "utf8"));
      await until(
        `pid ${pid} gone`,
        () => !alive(pid),
        () => `pid ${pid} still runs`,
        10_000,
      );
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
