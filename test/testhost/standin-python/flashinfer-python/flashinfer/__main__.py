"""`flashinfer show-config` (console script) and `python -m flashinfer show-config`."""
import sys

from .jit import show_config


def main():
    if sys.argv[1:2] == ["show-config"]:
        return show_config()
    print("usage: flashinfer show-config", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
