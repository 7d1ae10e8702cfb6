// The one "URL as seen on the host" helper, and the gate's view of it: ServingService's `endpoint`
// output, VerifiedGeneration's and ServiceComparison's URLs and tunnels all come from here.
import { describe, expect, it } from "vitest";
import { gateTunnel, gateUrl, urlOnHost, urlSeenFrom } from "../../components/services/endpoint";

const ssh = { kind: "ssh" };
const local = { kind: "local" };

describe("the service's URL as seen on the host", () => {
  it("reaches a wildcard bind and localhost at 127.0.0.1, any other address as it is", () => {
    expect(urlOnHost("0.0.0.0", 30000)).toBe("http://127.0.0.1:30000");
    expect(urlOnHost("localhost", 30000)).toBe("http://127.0.0.1:30000");
    expect(urlOnHost("127.0.0.1", 30001)).toBe("http://127.0.0.1:30001");
    expect(urlOnHost("10.0.0.7", 8000)).toBe("http://10.0.0.7:8000");
  });

  it("the gate: an SSH host's URL as seen on the host, through a tunnel to that address", () => {
    expect(gateUrl(ssh, "localhost", 30000)).toBe("http://127.0.0.1:30000");
    expect(gateTunnel(ssh, "localhost", 30000)).toEqual({ remoteHost: "127.0.0.1", remotePort: 30000 });
    expect(gateUrl(ssh, "10.0.0.7", 8000)).toBe("http://10.0.0.7:8000");
    expect(gateTunnel(ssh, "0.0.0.0", 8000)).toEqual({ remoteHost: "127.0.0.1", remotePort: 8000 });
  });

  it("the gate: a local host (this machine, or a folder standing for /) at 127.0.0.1, with no tunnel", () => {
    expect(gateUrl(local, "0.0.0.0", 30000)).toBe("http://127.0.0.1:30000");
    expect(gateTunnel(local, "0.0.0.0", 30000)).toBeUndefined();
  });
});

describe("a service as seen from another machine (urlSeenFrom: the router's workers, `pulumi up`'s router)", () => {
  const sim = (name: string) => ({ name, connection: { kind: "simulated" } });
  const ssh = (name: string, host: string) => ({ name, connection: { kind: "ssh", host } });

  it("from here: a simulated or local machine on its loopback, an SSH one at its address", () => {
    expect(urlSeenFrom("here", sim("r"), "0.0.0.0", 29001)).toBe("http://127.0.0.1:29001");
    expect(urlSeenFrom("here", ssh("r", "10.0.0.1"), "0.0.0.0", 29001)).toBe("http://10.0.0.1:29001");
    expect(urlSeenFrom("here", ssh("r", "fd00::1"), "::", 29001)).toBe("http://[fd00::1]:29001");
  });

  it("a service bound to one address of its own is reached there, from its machine and from elsewhere", () => {
    expect(urlSeenFrom("here", ssh("r", "gpu-1.example"), "10.0.0.9", 29001)).toBe("http://10.0.0.9:29001");
    expect(urlSeenFrom(ssh("r", "10.0.0.1"), ssh("r", "10.0.0.1"), "10.0.0.9", 30000)).toBe("http://10.0.0.9:30000");
  });
});
