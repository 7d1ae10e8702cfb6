"""gpuhost STAND-IN for torch (not PyTorch): the torch SGLang's parser imports, on a machine with no
accelerator. Concrete where SGLang's import-time probes read a value (version, device availability,
the out-of-tree backends stock torch lacks, fp8 limits, ReduceOp codes); inert placeholders
elsewhere (gpuhost_inert.py says what they do)."""
import sys
import types

import gpuhost_inert

# The pinned build (PyPI's torch 2.14.1 wheel reports this version and CUDA 13.0).
__version__ = "2.14.1+cu130"
version = types.SimpleNamespace(__version__=__version__, cuda="13.0", hip=None, musa=None, xpu=None, debug=False)
sys.modules[__name__ + ".version"] = version


class _Device:
    """torch.cuda, torch.mps, torch.xpu and torch.cpu as they answer on a CPU-only machine."""

    def __init__(self, name, available):
        self._name = name
        self._available = available

    def is_available(self):
        return self._available

    def device_count(self):
        return 1 if self._available else 0

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return gpuhost_inert.placeholder(f"torch.{self._name}.{name}")


cuda = _Device("cuda", False)
mps = _Device("mps", False)
xpu = _Device("xpu", False)
cpu = _Device("cpu", True)


class finfo:
    """The maxima SGLang reads at import (FP8_E4M3_MAX), as torch reports them."""

    _MAX = {"float8_e4m3fn": 448.0, "float8_e4m3fnuz": 240.0, "float8_e5m2": 57344.0, "float16": 65504.0}

    def __init__(self, dtype):
        self.max = self._MAX[dtype.__name__]
        self.min = -self.max


distributed = gpuhost_inert.InertModule(__name__ + ".distributed")
distributed.__path__ = []
# torch.distributed.ReduceOp's codes (c10d): SGLang converts SUM to int at import.
distributed.ReduceOp = types.SimpleNamespace(SUM=0, AVG=1, PRODUCT=2, MIN=3, MAX=4)
sys.modules[distributed.__name__] = distributed


class _Torch(gpuhost_inert.InertModule):
    # Out-of-tree backends (torch_npu, Habana, torch_musa) add these; stock torch has none, and
    # SGLang's device probes test them with hasattr.
    _ABSENT = {"npu", "hpu", "musa"}

    def __getattr__(self, name):
        if name in self._ABSENT:
            raise AttributeError(name)
        return super().__getattr__(name)


sys.modules[__name__].__class__ = _Torch
