/**
 * A throwaway certificate authority and a server certificate for 127.0.0.1, made with the openssl
 * CLI, so the test host can fetch package sources over real https from the test process: the CA goes
 * into the host's trust store (installTestCa), where curl, apt and Debian's pip look, as a vendor's
 * CA chain would be. Per test run, in a temporary folder; tests only.
 */
import { promises as fs } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { run } from "./proc";
import type { TestHost } from "./harness";

export interface TestTls {
  /** The CA certificate (PEM): what the host trusts. */
  caPem: string;
  /** The server's key and certificate (PEM, subjectAltName IP:127.0.0.1), signed by the CA. */
  key: string;
  cert: string;
  remove(): Promise<void>;
}

export async function makeTestTls(): Promise<TestTls> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "gpuhost-tls-"));
  const f = (name: string) => path.join(dir, name);
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  await run("openssl", [
    "req",
    "-x509",
    ...ec,
    "-keyout",
    f("ca.key"),
    "-out",
    f("ca.pem"),
    "-days",
    "2",
    "-subj",
    "/CN=gpuhost test CA (throwaway, tests only)",
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
  ]);
  await run("openssl", ["req", ...ec, "-keyout", f("server.key"), "-out", f("server.csr"), "-subj", "/CN=127.0.0.1"]);
  await fs.writeFile(
    f("server.ext"),
    "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
  );
  await run("openssl", [
    "x509",
    "-req",
    "-in",
    f("server.csr"),
    "-CA",
    f("ca.pem"),
    "-CAkey",
    f("ca.key"),
    "-CAcreateserial",
    "-out",
    f("server.pem"),
    "-days",
    "2",
    "-extfile",
    f("server.ext"),
  ]);
  const read = (name: string) => fs.readFile(f(name), "utf8");
  return {
    caPem: await read("ca.pem"),
    key: await read("server.key"),
    cert: await read("server.pem"),
    remove: () => fs.rm(dir, { recursive: true, force: true }),
  };
}

/** Puts the CA into the host's system trust store (update-ca-certificates), as an operator would. */
export async function installTestCa(host: TestHost, tls: TestTls): Promise<void> {
  const dest = path.join(host.rootDir, "usr/local/share/ca-certificates/gpuhost-test-ca.crt");
  await fs.mkdir(path.dirname(dest), { recursive: true });
  await fs.writeFile(dest, tls.caPem, { mode: 0o644 });
  await host.execOk("update-ca-certificates");
}
