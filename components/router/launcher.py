#!/usr/bin/env python3
# gpuhost-router: starts SMG (the Shepherd Model Gateway, SGLang's router) through its own Python
# API, so its API key never reaches a command line. `smg launch --api-key KEY` would leave the key in
# argv, readable by every user of the host in `ps` and /proc/PID/cmdline for as long as the router
# runs. Here the key is read from a systemd credential (LoadCredential=, $CREDENTIALS_DIRECTORY: a
# folder only this service can read) and set on smg's RouterArgs after parsing.
#
# Usage: launcher.py CONFIG.json
#   CONFIG.json: a flat mapping of `smg launch` flags (without --) to values, e.g.
#   {"host": "127.0.0.1", "port": 30100, "worker-urls": ["http://a:30000"], "policy": "cache_aware"}.
#   A list is one flag with several values; true is a bare flag. The key never belongs here.
#   $CREDENTIALS_DIRECTORY/router-api-key, when present: `api-key: "..."` (the file
#   components/services/scripts/api-key-file.sh writes).
import json
import os
import sys

KEY_CREDENTIAL = "router-api-key"
SECRET_FLAGS = {"api-key", "tenant-api-key", "control-plane-api-keys"}


def smg_argv(config):
    argv = []
    for flag, value in config.items():
        if flag in SECRET_FLAGS:
            raise SystemExit(f"gpuhost-router: {flag} must come from the credential, not the config file")
        if value is None or value is False:
            continue
        if value is True:
            argv.append(f"--{flag}")
        elif isinstance(value, list):
            argv.extend([f"--{flag}", *[str(v) for v in value]])
        else:
            argv.extend([f"--{flag}", str(value)])
    return argv


def read_key():
    folder = os.environ.get("CREDENTIALS_DIRECTORY")
    if not folder:
        return None
    path = os.path.join(folder, KEY_CREDENTIAL)
    if not os.path.exists(path):
        return None
    import yaml

    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    key = doc.get("api-key") if isinstance(doc, dict) else None
    if not isinstance(key, str) or not key:
        raise SystemExit(f"gpuhost-router: {KEY_CREDENTIAL} holds no api-key")
    return key


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: launcher.py CONFIG.json")
    with open(sys.argv[1], encoding="utf-8") as f:
        config = json.load(f)
    if not isinstance(config, dict):
        raise SystemExit("gpuhost-router: the config file must hold a JSON object")
    from smg.launch_router import launch_router, parse_router_args

    args = parse_router_args(smg_argv(config))
    # smg uses the one key both ways: clients must send it, and it authenticates to the workers.
    args.api_key = read_key()
    launch_router(args)


if __name__ == "__main__":
    main()
