/**
 * The test host reaching the package index the way this machine does. The container shares this
 * machine's network, but not its trust store: where this machine's outbound https goes through a
 * TLS-inspecting proxy (its CA added locally, under /usr/local/share/ca-certificates), the
 * container's stock Debian store refuses the proxy's certificate ("self-signed certificate in
 * certificate chain"), so pip there reaches no index. A host deployed on this network would be given
 * the same CA by its operator; the test host is given it here, through the same Debian mechanism
 * (update-ca-certificates, where curl and Debian's pip look). Nothing is disabled: pip still verifies
 * every certificate and, with --require-hashes, every wheel. On a machine without such a CA the folder
 * is empty and nothing changes. A proxy named in this machine's https_proxy goes into the host's
 * /etc/pip.conf (the container shares loopback, so a proxy on 127.0.0.1 is reachable from inside).
 */
import { existsSync, promises as fs } from "node:fs";
import * as path from "node:path";
import type { TestHost } from "./harness";

const LOCAL_CAS = "/usr/local/share/ca-certificates";

/** This machine's locally added CA certificates, copied into the host's store; returns their names. */
export async function shareEgressTrust(host: TestHost): Promise<string[]> {
  const names = existsSync(LOCAL_CAS) ? (await fs.readdir(LOCAL_CAS)).filter((f) => f.endsWith(".crt")).sort() : [];
  if (names.length > 0) {
    const dest = path.join(host.rootDir, LOCAL_CAS.slice(1), "gpuhost-machine");
    await fs.mkdir(dest, { recursive: true });
    for (const n of names) await fs.copyFile(path.join(LOCAL_CAS, n), path.join(dest, n));
    await host.execOk("update-ca-certificates");
  }
  const proxy = process.env.https_proxy ?? process.env.HTTPS_PROXY;
  if (proxy) await fs.writeFile(path.join(host.rootDir, "etc/pip.conf"), `[global]\nproxy = ${proxy}\n`);
  return names;
}
