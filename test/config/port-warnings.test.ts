/**
 * Issue 42.4: a configured port inside the kernel's ephemeral range gets a warning naming the range
 * (the program logs it at preview and up); one below it gets none. The range is the one this machine's
 * /proc/sys/net/ipv4/ip_local_port_range gives (ports.ts ephemeralRange), and a given one for the
 * edges.
 */
import { describe, expect, it } from "vitest";
import { configuredPortWarnings, parseConfig } from "../../stack/config";
import { ephemeralPortWarning, ephemeralRange } from "../../ports";
import { stackConfig } from "./stacks";

describe("ports inside the ephemeral range", () => {
  it("the shipped stacks' ports lie below this machine's range: no warning", () => {
    for (const stack of ["sim", "sim-fleet", "sim-mixed"])
      expect(configuredPortWarnings(parseConfig(stackConfig(stack))), stack).toEqual([]);
  });

  it("services.port, a host's own port and the router's ports inside the range are each named with the range", () => {
    const [low, high] = ephemeralRange();
    const inside = low + 2;
    const config = parseConfig({
      ...stackConfig("sim-fleet"),
      services: { ...(stackConfig("sim-fleet").services as object), port: inside },
    });
    const warnings = configuredPortWarnings(config);
    expect(warnings[0]).toBe(
      `gpuhost:services.port ${inside} lies inside the kernel's ephemeral port range ${low}-${high} (/proc/sys/net/ipv4/ip_local_port_range), from which every outgoing connection takes its source port: it can be taken before the service binds it, and a connect while nothing listens can connect to itself; a port below ${low} avoids both.`,
    );
    const withRouter = parseConfig({
      ...stackConfig("sim-fleet"),
      router: { ...(stackConfig("sim-fleet").router as object), port: high, prometheusPort: low },
    });
    expect(configuredPortWarnings(withRouter).map((w) => w.split(" ")[0])).toEqual([
      "gpuhost:router.port",
      "gpuhost:router.prometheusPort",
    ]);
  });

  it("the range's edges: low and high are inside, one below and one above are not", () => {
    const range: [number, number] = [40000, 40010];
    expect(ephemeralPortWarning("p", 40000, range)).toMatch(/range 40000-40010/);
    expect(ephemeralPortWarning("p", 40010, range)).toMatch(/range 40000-40010/);
    expect(ephemeralPortWarning("p", 39999, range)).toBeUndefined();
    expect(ephemeralPortWarning("p", 40011, range)).toBeUndefined();
  });
});
