"""Stand-in `python -m sglang.launch_server`: maps SGLang's flags onto the simulator and execs it.

Like the real server, the first generation needs FlashInfer's sampling kernels. The stand-in runs
FlashInfer's (stand-in) JIT compile with this host's real nvcc and headers before it execs the
simulator; when that compile fails, the simulator is started with the `jit-crash` fault, so the
first generation prints the curand.h line and the process dies, as it did in the story.

Which simulator profile plays which model comes from a small JSON file the test host writes
(default /etc/gpuhost-standin/sglang.json, env GPUHOST_STANDIN_SGLANG_CONFIG):
  {"simulatorMain": ".../main.js", "node": "/usr/bin/node", "timeScale": 1, "faults": [],
   "profiles": {"default": "tiny", "EAGLE3": "tiny", "DFLASH": "tiny"}}
"""
import argparse
import json
import os
import sys

DEFAULTS = {
    "simulatorMain": "/opt/gpuhost-sim/dist/simulator/main.js",
    "node": "/usr/bin/node",
    "timeScale": 1,
    "faults": [],
    "profiles": {"default": "tiny"},
}


def load_config():
    path = os.environ.get("GPUHOST_STANDIN_SGLANG_CONFIG", "/etc/gpuhost-standin/sglang.json")
    config = dict(DEFAULTS)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            config.update(json.load(f))
    return config


def parse_args(argv):
    p = argparse.ArgumentParser(prog="sglang.launch_server (gpuhost stand-in)")
    p.add_argument("--model-path", required=True)
    p.add_argument("--served-model-name")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--api-key")
    p.add_argument("--speculative-algorithm")
    # every other SGLang flag (--tp, --reasoning-parser, ...) is accepted; the profile plays them
    args, _rest = p.parse_known_args(argv)
    return args


def jit_faults():
    from flashinfer.jit import JitCompileError, compile_sampling_kernels
    try:
        compile_sampling_kernels()
        return []
    except JitCompileError:
        return ["jit-crash"]


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    config = load_config()
    profiles = config["profiles"]
    profile = profiles.get(args.speculative_algorithm or "default", profiles.get("default", "tiny"))
    faults = list(config.get("faults", []))
    for fault in jit_faults():
        if fault not in faults:
            faults.append(fault)
    cmd = [config["node"], config["simulatorMain"], "--profile", profile,
           "--time-scale", str(config["timeScale"])]
    for fault in faults:
        cmd += ["--fault", fault]
    cmd += ["--host", args.host, "--port", str(args.port),
            "--served-model-name", args.served_model_name or args.model_path]
    if args.api_key:
        cmd += ["--api-key", args.api_key]
    shown = [("***" if i > 0 and cmd[i - 1] == "--api-key" else w) for i, w in enumerate(cmd)]
    print("gpuhost stand-in sglang.launch_server: exec " + " ".join(shown), file=sys.stderr, flush=True)
    os.execv(cmd[0], cmd)


if __name__ == "__main__":
    main()
