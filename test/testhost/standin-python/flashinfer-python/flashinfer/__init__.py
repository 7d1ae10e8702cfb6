"""gpuhost STAND-IN for flashinfer-python: no kernels, but FlashInfer's JIT path for real.

It finds nvcc the way FlashInfer does (flashinfer/jit/cpp_ext.py get_cuda_path: CUDA_HOME,
CUDA_PATH, the folder of `which nvcc`, /usr/local/cuda), refuses CUDA < 12.9 on SM 12.x as
compilation_context.py does, and compiles a sampling source that includes <curand.h> with that
nvcc into the JIT workspace. On a host without libcurand-dev the compile fails exactly as it did
in the story, because the installed (stand-in) nvcc really cannot find the header."""
__version__ = "@FLASHINFER_VERSION@"
