// The Router's host steps as values (components/router/steps.ts): what the component hands to
// hostScript and the test-host suite runs over SSH. Pure: the scripts, their arguments decoded, the stamp.
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import {
  launcherText,
  renderRouterUnit,
  requirementsText,
  routerIdentity,
  routerLaunchConfig,
} from "../../components/router/render";
import { RouterSchema } from "../../components/router/schema";
import { configureStep, installStep, keyFileStdin, keyFileStep } from "../../components/router/steps";

const repo = path.resolve(__dirname, "../..");
const router = RouterSchema.parse({ host: "a" });
const decode = (s: string) => Buffer.from(s, "base64").toString("utf8");

describe("Router steps", () => {
  it("name scripts that exist", () => {
    const c = configureStep(router, [], { apiKey: true, keyHash: "" });
    for (const s of [
      installStep(router).script,
      keyFileStep().script,
      keyFileStep().deleteScript,
      c.script,
      c.deleteScript,
    ])
      expect(fs.existsSync(path.join(repo, s ?? "missing"))).toBe(true);
  });

  it("install: the venv, the requirements and the launcher, byte for byte", () => {
    const [venv, reqs, launcher] = installStep(router).args;
    expect(venv).toBe("/opt/gpuhost-router/venv");
    expect(decode(reqs)).toBe(requirementsText());
    expect(decode(launcher)).toBe(launcherText());
  });

  it("install: only pip's index options follow, from router.pipIndexUrl and router.pipExtraIndexUrls", () => {
    expect(installStep(router).args).toHaveLength(3);
    const mirrored = RouterSchema.parse({
      host: "a",
      pipIndexUrl: "https://pypi.mirror.internal/simple/",
      pipExtraIndexUrls: ["file:///srv/wheels/simple/"],
    });
    expect(installStep(mirrored).args.slice(3)).toEqual([
      "--index-url",
      "https://pypi.mirror.internal/simple/",
      "--extra-index-url",
      "file:///srv/wheels/simple/",
    ]);
    expect(() => RouterSchema.parse({ host: "a", pipIndexUrl: "http://pypi.mirror.internal/simple/" })).toThrow(
      /http:\/\/ is refused/,
    );
  });

  it("key file: the key only on standard input", () => {
    const step = keyFileStep();
    expect(step.args).toEqual(["/etc/gpuhost/router-api-key.yaml"]);
    expect(step.deleteArgs).toEqual(["/etc/gpuhost/router-api-key.yaml"]);
    expect(keyFileStdin("k-1")).toBe("k-1\n");
  });

  it("configure: the unit, the launcher's config with the workers, and a stamp over both and the key's keyed hash", () => {
    const urls = ["http://10.0.0.2:30000", "http://10.0.0.1:30000"];
    const c = configureStep(router, urls, { apiKey: true, keyHash: "kh" });
    const [unit, config, stamp] = c.args;
    expect(decode(unit)).toBe(renderRouterUnit(router, { apiKey: true }));
    expect(JSON.parse(decode(config))).toEqual(routerLaunchConfig(router, urls));
    expect(c.identity).toBe(routerIdentity(decode(unit), routerLaunchConfig(router, urls)));
    expect(stamp).toBe(createHash("sha256").update(`${c.identity}\0kh`).digest("hex"));
    // A rotated key (another keyed hash) changes the stamp, not the identity.
    const rotated = configureStep(router, urls, { apiKey: true, keyHash: "kh2" });
    expect(rotated.identity).toBe(c.identity);
    expect(rotated.args[2]).not.toBe(stamp);
  });
});
