"""gpuhost STAND-IN for sglang: `python -m sglang.launch_server` starts the project's SGLang
simulator (node) with the flags a client can observe. Not SGLang; see test/testhost/README.md."""
__version__ = "@SGLANG_VERSION@"
