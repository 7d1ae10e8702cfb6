"""gpuhost STAND-IN for triton (not Triton): imported by SGLang's parser module at load, never run
(gpuhost_inert.py)."""
import sys

import gpuhost_inert

# torch 2.14.1's pin (triton~=3.8.0).
__version__ = "3.8.0"
sys.modules[__name__].__class__ = gpuhost_inert.InertModule
