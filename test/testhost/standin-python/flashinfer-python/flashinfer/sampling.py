"""Stand-in flashinfer.sampling: the first call JIT-compiles the kernels (which include curand.h)."""
from .jit import compile_sampling_kernels


def top_k_top_p_sampling_from_probs(probs, top_k=None, top_p=None, **_kwargs):
    compile_sampling_kernels()
    return probs
