"""Judges gpuhost's rendered SGLang command lines with SGLang's own parser (the pinned release).

Run with the venv of test/sglang/setup-venv.sh and test/sglang/standin first on PYTHONPATH (torch,
triton: inert stand-ins, see standin/gpuhost_inert.py). Reads one JSON request on stdin:

  {"units": [{"name": "...", "argv": ["--model-path", ...]}, ...]}
      Each argv goes through sglang.srt.server_args.prepare_server_args, the function
      `python -m sglang.launch_server` calls: argparse over ServerArgs.add_cli_args, SGLang's
      `--config FILE` merge (ConfigArgumentMerger), then ServerArgs.from_cli_args (the record and its
      __post_init__). Answers per unit {"name", "ok", "error"?, "args"?}. A unit with
      "resolve": true then goes through ServerArgs.resolve_once(), the checks launch_server runs
      next (model config, device, speculative settings): that needs the real torch and the imports
      of SGLang's model layers (GPUHOST_SGLANG_VENV in server-args.test.ts), not the stand-ins.
  {"flags": true}
      Every option of SGLang's parser: its option strings, dest, kind (bool: takes no value), the
      value's type name and choices (in the parser's order, which its error messages print).

Writes one JSON answer on stdout. SGLang's package __init__ (its frontend language API and Hugging
Face patches) is not run: the parser module is loaded on its own, as nothing in it needs them.
"""
import argparse
import contextlib
import importlib.util
import io
import json
import sys
import types


def load_server_args():
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("sglang is not installed in this interpreter (run test/sglang/setup-venv.sh)")
    package = types.ModuleType("sglang")
    package.__path__ = list(spec.submodule_search_locations)
    package.__file__ = spec.origin
    sys.modules["sglang"] = package
    from sglang.srt import server_args

    return server_args


FIELDS = (
    "model_path",
    "served_model_name",
    "trust_remote_code",
    "context_length",
    "host",
    "port",
    "tp_size",
    "dp_size",
    "mem_fraction_static",
    "api_key",
    "reasoning_parser",
    "tool_call_parser",
    "enable_metrics",
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_dflash_block_size",
    "device",
)


def judge(server_args, argv, resolve=False):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            record = server_args.prepare_server_args(argv)
    except SystemExit as e:
        # argparse prints its usage and `error: ...` to stderr, then exits 2.
        lines = [l for l in err.getvalue().splitlines() if "error:" in l]
        return {"ok": False, "error": lines[-1] if lines else f"exit {e.code}"}
    except Exception as e:  # SGLang's own ValueErrors (e.g. from its --config merge)
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}
    args = {f: getattr(record, f, None) for f in FIELDS}
    if resolve:
        try:
            with contextlib.redirect_stdout(sys.stderr):
                record.resolve_once()
        except Exception as e:  # ValueErrors, and what a partial setting crashes with
            return {"ok": False, "error": f"resolve: {type(e).__name__}: {e}", "args": args}
    return {"ok": True, "args": args}


def flags(server_args):
    parser = argparse.ArgumentParser()
    server_args.ServerArgs.add_cli_args(parser)
    out = []
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        # nargs 0: store_true and SGLang's own flag actions (DeprecatedStoreTrueAction, ...).
        kind = "bool" if action.nargs == 0 else "value"
        out.append(
            {
                "options": action.option_strings,
                "dest": action.dest,
                "kind": kind,
                "type": getattr(action.type, "__name__", None) if action.type else None,
                "choices": [str(c) for c in action.choices] if action.choices else None,
                "nargs": action.nargs,
            }
        )
    return out


def main():
    request = json.load(sys.stdin)
    with contextlib.redirect_stdout(sys.stderr):
        server_args = load_server_args()
    if request.get("flags"):
        answer = {"flags": flags(server_args)}
    else:
        answer = {
            "units": [
                {"name": u["name"], **judge(server_args, u["argv"], u.get("resolve", False))} for u in request["units"]
            ]
        }
    json.dump(answer, sys.stdout, default=str)


if __name__ == "__main__":
    main()
