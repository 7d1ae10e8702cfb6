"""gpuhost STAND-IN for torchvision: imported by SGLang's model configs, never run (gpuhost_inert.py)."""
import sys

import gpuhost_inert

sys.modules[__name__].__class__ = gpuhost_inert.InertModule
