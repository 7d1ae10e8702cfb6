// The connection schema: valid shapes pass with defaults; hostile or out-of-range values are
// rejected with the config path of the offending field.
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { ConnectionConfigError, describeConnection, parseConnection } from "../../components/host/connection";

const key = "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n";
const ssh = { kind: "ssh", host: "gpu-1.example.internal", privateKey: key };

function issues(value: unknown, at = "gpuhost:hosts.0.connection"): string[] {
  try {
    parseConnection(value, at);
  } catch (e) {
    expect(e).toBeInstanceOf(ConnectionConfigError);
    return (e as ConnectionConfigError).issues.map((i) => `${i.path}: ${i.message}`);
  }
  throw new Error("expected a ConnectionConfigError");
}

describe("host connection schema", () => {
  it("applies defaults: port 22, user root", () => {
    expect(parseConnection(ssh)).toMatchObject({ kind: "ssh", port: 22, user: "root" });
    expect(parseConnection({ ...ssh, host: "10.0.0.7", port: 2222, user: "ubuntu" })).toMatchObject({
      port: 2222,
      user: "ubuntu",
    });
    expect(parseConnection({ ...ssh, host: "::1" })).toMatchObject({ host: "::1" });
    expect(parseConnection({ kind: "local" })).toEqual({ kind: "local" });
    const underRoot = { kind: "local", root: "/tmp/sim", toolsDir: "sim-host/bin" };
    expect(parseConnection(underRoot)).toEqual(underRoot);
  });

  it("rejects a port of 70000 and of 0, with the config path", () => {
    expect(issues({ ...ssh, port: 70000 })[0]).toMatch(/^gpuhost:hosts\.0\.connection\.port: .*65535/);
    expect(issues({ ...ssh, port: 0 })[0]).toMatch(/^gpuhost:hosts\.0\.connection\.port: /);
    expect(issues({ ...ssh, port: 22.5 })[0]).toMatch(/\.port: /);
  });

  it("rejects hostile host and user names", () => {
    expect(issues({ ...ssh, host: "x; touch /tmp/pwned" })[0]).toMatch(/\.host: must be a DNS name/);
    expect(issues({ ...ssh, host: "$(id)" })[0]).toMatch(/\.host: /);
    expect(issues({ ...ssh, host: "-oProxyCommand=touch" })[0]).toMatch(/\.host: /);
    expect(issues({ ...ssh, user: "a user with spaces" })[0]).toMatch(/\.user: must be a POSIX user name/);
    expect(issues({ ...ssh, user: "root;id" })[0]).toMatch(/\.user: /);
    expect(issues({ ...ssh, bastion: { host: "jump", privateKey: key, port: 99999 } })[0]).toMatch(/\.bastion\.port: /);
  });

  it("rejects a key path instead of key text, a malformed host key, unknown fields and kinds", () => {
    expect(issues({ ...ssh, privateKey: "~/.ssh/id_ed25519" })[0]).toMatch(
      /\.privateKey: must be an OpenSSH\/PEM private key/,
    );
    expect(issues({ ...ssh, hostKey: "ssh-ed25519 AAAA; rm" })[0]).toMatch(/\.hostKey: /);
    expect(issues({ ...ssh, password: "x" })[0]).toMatch(/connection: .*password|Unrecognized key/);
    expect(issues({ kind: "telnet" })[0]).toMatch(/^gpuhost:hosts\.0\.connection\.kind: /);
    // Relative to the program's folder is allowed (it keeps the checkout's path out of the state);
    // the real root is not, however it is written.
    expect(parseConnection({ kind: "local", root: ".gpuhost/sim-hosts/a" }, "gpuhost:hosts.0.connection")).toEqual({
      kind: "local",
      root: ".gpuhost/sim-hosts/a",
    });
    expect(issues({ kind: "local", root: "/" })[0]).toMatch(/\.root: must be a folder other than \//);
    expect(issues({ kind: "local", root: path.relative(process.cwd(), "/") })[0]).toMatch(
      /\.root: must be a folder other than \//,
    );
  });

  it("describes a connection without its key", () => {
    const d = describeConnection(parseConnection({ ...ssh, bastion: { host: "jump", privateKey: key } }));
    expect(d).toBe("ssh root@gpu-1.example.internal:22 via root@jump:22");
    expect(d).not.toContain("PRIVATE");
  });
});
