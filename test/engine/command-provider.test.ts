/**
 * gpuhost's command provider, method by method, as plain functions (the engine test covers it under the
 * real engine). Local commands really run /bin/sh.
 */
import { describe, expect, it } from "vitest";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { LOCAL, provider, reveal, shQuote } from "../../engine/offline-plugins/command-provider/provider";

const urn = `urn:pulumi:s::p::gpuhost:index:CudaToolkit$${LOCAL}::t`;
const secret = (value: unknown) => ({ "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", value });

describe("command provider", () => {
  it("replaces on a trigger change, updates on a script change, and does nothing otherwise", async () => {
    const base = { create: "echo a", triggers: ["h1"] };
    expect(await provider.diff("id", urn, base, { ...base })).toMatchObject({ changes: false, replaces: [] });
    expect(await provider.diff("id", urn, base, { ...base, triggers: ["h2"] })).toMatchObject({
      changes: true,
      replaces: ["triggers"],
    });
    expect(await provider.diff("id", urn, base, { ...base, create: "echo b" })).toMatchObject({
      changes: true,
      replaces: [],
    });
  });

  it("create runs the command and records stdout and stderr, trimmed of the final newline", async () => {
    const r = await provider.create(urn, { create: "echo out; echo err >&2", environment: { X: "1" } });
    expect(r.outs).toMatchObject({ stdout: "out", stderr: "err", create: "echo out; echo err >&2" });
  });

  it("a failing create reports the exit status and the output's tail", async () => {
    await expect(
      provider.create(urn, { create: "echo 'fatal error: curand.h: No such file or directory' >&2; exit 3" }),
    ).rejects.toThrow(/exit status 3[\s\S]*curand\.h: No such file or directory/);
  });

  it("update runs `update` (else `create`) with the previous output in the environment", async () => {
    const olds = { create: "echo first", stdout: "first", stderr: "" };
    const r = await provider.update("id", urn, olds, { create: "echo x", update: 'echo "was $PULUMI_COMMAND_STDOUT"' });
    expect(r.outs.stdout).toBe("was first");
    const r2 = await provider.update("id", urn, olds, { create: "echo again" });
    expect(r2.outs.stdout).toBe("again");
  });

  it("delete runs `delete`; environment and secrets reach the command as plain values", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cmdprov-"));
    const file = path.join(dir, "gone");
    fs.writeFileSync(file, "x");
    await provider.delete("id", urn, {
      delete: `rm "$F"; printf '%s' "$K" > "$F.k"`,
      environment: { F: file, K: secret("s3cret") },
    });
    expect(fs.existsSync(file)).toBe(false);
    expect(fs.readFileSync(`${file}.k`, "utf8")).toBe("s3cret");
  });

  it("reveal unwraps nested secrets; shQuote survives hostile strings", async () => {
    expect(reveal({ a: secret({ b: secret("c") }), d: [secret(1)] })).toEqual({ a: { b: "c" }, d: [1] });
    const hostile = `x'; touch /tmp/pwned; echo '$(id)`;
    const r = await provider.create(urn, { create: `printf '%s' ${shQuote(hostile)}` });
    expect(r.outs.stdout).toBe(hostile);
  });

  it("refuses resource types it does not implement", async () => {
    await expect(provider.create("urn:pulumi:s::p::command:remote:CopyToRemote::c", {})).rejects.toThrow(
      /does not implement/,
    );
  });
});
