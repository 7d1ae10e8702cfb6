// Mock test (pulumi.runtime.setMocks): GpuServingHost on an SSH host, with an API key and a
// pre-warm: remote Commands only, no preparation, the key only on stdin and as secrets, the gate
// reaching the service through the SSH connection.
import { describe, expect, it } from "vitest";
import * as pulumi from "@pulumi/pulumi";
import { hostConnection, parseConfig } from "../../stack/config";
import { GpuServingHost } from "../../components/gpu-serving-host";
import { connectedPlatform } from "../../components/platform";
import { DEFAULT_API_KEY_FILE } from "../../components/services/serving-service";
import { dependencyNames, named, recordResources, unwrap } from "./harness";

const rec = recordResources((name) => (name.endsWith("-toolkit-verify") ? "fingerprint=f00d\n" : ""));

const KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nk\n-----END OPENSSH PRIVATE KEY-----";
const API_KEY = "sk-0123456789abcdef0123456789abcdef";
const config = parseConfig({
  hosts: [{ name: "gpu1", connection: { kind: "ssh", host: "10.0.0.5", user: "ops" }, gpus: { count: 8 } }],
  services: { tp: 8, host: "0.0.0.0", modelPath: "/models/kimi" },
  // a file:// index on the host: a remote one needs a hash lock (environment.requirementsLock)
  environment: { prewarm: true, pipIndexUrl: "file:///srv/pypi/simple/" },
  apiKey: API_KEY,
});

describe("GpuServingHost on an SSH host (mocks)", async () => {
  const platform = connectedPlatform(hostConnection(config.hosts[0], "/p", () => pulumi.secret(KEY)));
  new GpuServingHost("gpu1", { host: config.hosts[0], platform, config, apiKey: pulumi.secret(API_KEY) });
  const all = await rec.settle();
  const commands = all.filter((r) => r.type.startsWith("command:"));

  it("runs every host script as a remote Command over the host's connection, and prepares nothing", () => {
    expect(commands.length).toBeGreaterThan(8);
    for (const c of commands) {
      expect(c.type, c.name).toBe("command:remote:Command");
      const conn = unwrap(c.inputs.connection);
      expect(conn.secret, c.name).toBe(true);
      expect(conn.value).toMatchObject({ host: "10.0.0.5", port: 22, user: "ops", privateKey: KEY });
    }
    expect(all.find((r) => r.name === "gpu1-prepare")).toBeUndefined();
    expect(named(all, "gpu1-env-prewarm").inputs.create).toContain("prewarm.sh");
    expect(dependencyNames(all, named(all, "gpu1-env-prewarm"))).toEqual(
      expect.arrayContaining(["gpu1-env-venv", "gpu1-env-jit-cache"]),
    );
  });

  it("the API key travels only on the key file's stdin, as a secret; no command line holds it", () => {
    const keyFile = named(all, "gpu1-service-api-key-file").inputs;
    expect(unwrap(keyFile.stdin)).toEqual({ secret: true, value: `${API_KEY}\n` });
    expect(keyFile.create).toContain(DEFAULT_API_KEY_FILE);
    for (const c of commands) {
      expect(JSON.stringify(c.inputs.create ?? ""), c.name).not.toContain(API_KEY);
      expect(JSON.stringify(c.inputs.triggers ?? []), c.name).not.toContain(API_KEY);
    }
    // Units install after the key file exists.
    expect(dependencyNames(all, named(all, "gpu1-service-unit-autoregressive"))).toContain("gpu1-service-api-key-file");
  });

  it("installs the rendered unit (base64 in install-unit.sh's arguments): SGLang from the venv, the key from its file", () => {
    const install = named(all, "gpu1-service-unit-autoregressive").inputs.create as string;
    const words = install.trim().split(" ");
    expect(words.at(-2)).toBe("sglang-autoregressive.service");
    const unit = Buffer.from(words.at(-1)!, "base64").toString("utf8");
    expect(unit).toMatch(/^ExecStart=\/opt\/gpuhost\/venv\/bin\/python3 -m sglang\.launch_server .*--tp 8/m);
    // the key file as a systemd credential, read by SGLang with --config (never argv)
    expect(unit).toContain(`LoadCredential=sglang-server-args.yaml:${DEFAULT_API_KEY_FILE}`);
    expect(unit).toContain("--config %d/sglang-server-args.yaml");
    expect(unit).not.toContain(API_KEY);
  });

  it("the gate reaches the service through the SSH connection (a secret), reading the unit over it", () => {
    const v = named(all, "gpu1-verified").inputs;
    const access = unwrap(v.hostAccess);
    expect(access.secret).toBe(true);
    expect(access.value).toMatchObject({
      unit: "sglang-autoregressive.service",
      remoteHost: "127.0.0.1",
      remotePort: config.services.port,
    });
    expect((access.value as { connection: unknown }).connection).toMatchObject({
      kind: "ssh",
      host: "10.0.0.5",
      privateKey: KEY,
    });
    expect(v.serviceStateCommand).toBeUndefined();
    expect(unwrap(v.apiKey)).toEqual({ secret: true, value: API_KEY });
  });

  it("ToolkitState probes over the same connection, stored as a secret; no preparation among its repairs", () => {
    const ts = named(all, "gpu1-toolkit-state").inputs;
    expect(unwrap(ts.connection).secret).toBe(true);
    expect((ts.repairs as { script: string }[])[0].script).toBe("components/cuda-toolkit/scripts/repository.sh");
  });
});
