"""Which CUDA the stand-in torch claims to be built for; the wheel builder writes these lines."""
__version__ = "@TORCH_VERSION@"
cuda = "@TORCH_CUDA@"
