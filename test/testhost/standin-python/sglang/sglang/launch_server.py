"""Stand-in `python -m sglang.launch_server`: hands SGLang's flags to the simulator's sglang entry.

Like the real server, the first generation needs FlashInfer's sampling kernels. The stand-in runs
FlashInfer's (stand-in) JIT compile with this host's real nvcc and headers before it execs the
simulator; when that compile fails, the simulator is started with the `jit-crash` fault, so the
first generation prints the curand.h line and the process dies, as it did in the story.

The API key: like the pinned SGLang, `--config FILE.yaml` takes flags from a file (SGLang's
ConfigArgumentMerger: keys become flags placed before the command line's, so the command line wins;
.yaml/.yml/.json only). gpuhost's unit passes `--config` with a systemd credential holding
`api-key: "..."`, so the key is never in any process's argv: the stand-in forwards `--config` (the
path, not the key) to the simulator, which reads it the same way.

The simulator's entry (simulator/sglang.js) takes the unit's own command line, as the simulated host
runs it: --speculative-algorithm and the draft settings shape acceptance, and unknown flags are
refused as SGLang refuses them. What flags cannot say (profile, time scale, faults) goes in its
environment (GPUHOST_SIM_PROFILE, GPUHOST_SIM_TIME_SCALE, GPUHOST_SIM_FAULTS).

Which simulator profile plays which model comes from a small JSON file the test host writes
(default /etc/gpuhost-standin/sglang.json, env GPUHOST_STANDIN_SGLANG_CONFIG):
  {"simulatorSglang": ".../sglang.js", "node": "/usr/bin/node", "timeScale": 1, "faults": [],
   "profiles": {"default": "tiny", "EAGLE3": "tiny", "DFLASH": "tiny"}}
"""
import argparse
import json
import os
import sys

DEFAULTS = {
    "simulatorSglang": "/opt/gpuhost-sim/dist/simulator/sglang.js",
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


def parse_flat_yaml(text):
    """The flat `key: value` mappings gpuhost writes (Debian's minimal python3 has no PyYAML)."""
    data = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise ValueError("Config file must contain a dictionary at root level")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        data[key.strip()] = value
    return data


def merge_config(argv):
    """SGLang's --config: the file's keys as flags, before the command line's own (which win)."""
    at = [i for i, a in enumerate(argv) if a == "--config"]
    if not at:
        return argv, None
    if len(at) > 1:
        raise ValueError("Multiple config files specified! Only one allowed.")
    if at[0] == len(argv) - 1:
        raise ValueError("No config file specified after --config flag!")
    path = argv[at[0] + 1]
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in (".yaml", ".yml", ".json"):
        raise ValueError(f"Config file must be YAML or JSON format, got: {suffix}")
    if not os.path.exists(path):
        raise ValueError(f"Config file not found: {path}")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    data = json.loads(text) if suffix == ".json" else parse_flat_yaml(text)
    flags = []
    for key, value in data.items():
        flags += ["--" + key.replace("_", "-"), str(value)]
    return flags + argv[: at[0]] + argv[at[0] + 2 :], path


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
    merged, config_path = merge_config(sys.argv[1:] if argv is None else argv)
    args = parse_args(merged)
    config = load_config()
    profiles = config["profiles"]
    profile = profiles.get(args.speculative_algorithm or "default", profiles.get("default", "tiny"))
    faults = list(config.get("faults", []))
    for fault in jit_faults():
        if fault not in faults:
            faults.append(fault)
    # The unit's own flags, --config FILE included (the path, never the key): the entry merges the
    # file as SGLang does.
    original = sys.argv[1:] if argv is None else argv
    cmd = [config["node"], config["simulatorSglang"]] + original
    env = dict(os.environ)
    env["GPUHOST_SIM_PROFILE"] = profile
    env["GPUHOST_SIM_TIME_SCALE"] = str(config["timeScale"])
    env["GPUHOST_SIM_FAULTS"] = ",".join(faults)
    print("gpuhost stand-in sglang.launch_server: exec " + " ".join(cmd)
          + f" (profile {profile}, faults {env['GPUHOST_SIM_FAULTS'] or 'none'})",
          file=sys.stderr, flush=True)
    os.execve(cmd[0], cmd, env)


if __name__ == "__main__":
    main()
