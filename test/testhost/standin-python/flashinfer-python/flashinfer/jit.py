"""FlashInfer's JIT lookup and compile, as the stand-in performs them (see the package docstring)."""
import os
import re
import shutil
import subprocess

from . import __version__

# What include/flashinfer/sampling.cuh pulls in: the header the story's host lacked.
SAMPLING_SOURCE = """#include <cuda_runtime.h>
#include <curand.h>
#include <curand_kernel.h>
__global__ void gpuhost_standin_sampling_kernel() {}
"""


class JitCompileError(RuntimeError):
    pass


def get_cuda_path():
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            return os.environ[var]
    nvcc = shutil.which("nvcc")
    if nvcc:
        return os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    return "/usr/local/cuda"


def get_cuda_version(cuda_home):
    try:
        out = subprocess.run([os.path.join(cuda_home, "bin", "nvcc"), "--version"],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        import torch
        return torch.version.cuda
    m = re.search(r"release (\d+\.\d+)", out)
    return m.group(1) if m else None


def workspace_dir():
    base = os.environ.get("FLASHINFER_WORKSPACE_BASE", os.path.expanduser("~"))
    return os.path.join(base, ".cache", "flashinfer", __version__, "120", "cached_ops", "sampling")


def compile_sampling_kernels():
    """Compiles the sampling module once per workspace; raises JitCompileError with nvcc's output."""
    out_dir = workspace_dir()
    built = os.path.join(out_dir, "sampling.so")
    if os.path.exists(built):
        return built
    cuda_home = get_cuda_path()
    version = get_cuda_version(cuda_home)
    if version is None or tuple(int(x) for x in version.split(".")) < (12, 9):
        raise JitCompileError(f"SM 12.x requires CUDA >= 12.9 (found {version} at {cuda_home})")
    os.makedirs(out_dir, exist_ok=True)
    src = os.path.join(out_dir, "sampling.cu")
    with open(src, "w", encoding="utf-8") as f:
        f.write(SAMPLING_SOURCE)
    # a shared object, as FlashInfer's ninja build links each JIT module (NVIDIA's nvcc on the test host)
    cmd = [os.path.join(cuda_home, "bin", "nvcc"), "-gencode=arch=compute_120,code=sm_120",
           "-Xcompiler", "-fPIC", "-shared", "-o", built + ".tmp", src]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise JitCompileError(f"Ninja build failed: {' '.join(cmd)}\n{proc.stderr}")
    os.replace(built + ".tmp", built)
    return built


def show_config():
    cuda_home = get_cuda_path()
    print(f"flashinfer version: {__version__} (gpuhost stand-in)")
    print(f"CUDA_HOME: {cuda_home}")
    print(f"nvcc release: {get_cuda_version(cuda_home)}")
    print(f"JIT workspace: {workspace_dir()}")
    return 0
