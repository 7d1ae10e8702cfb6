"""gpuhost STAND-IN for the ninja wheel: provides a `ninja` command that reports a version."""
import sys

VERSION = "@NINJA_VERSION@"


def main():
    if "--version" in sys.argv[1:]:
        print(VERSION)
        return 0
    print("gpuhost stand-in ninja: builds nothing", file=sys.stderr)
    return 0
