"""gpuhost STAND-IN for torch: not PyTorch. It answers what the serving environment checks
(torch.version.cuda) and the few calls FlashInfer's prewarm makes; no tensor math happens."""
from . import cuda, version  # noqa: F401

__version__ = version.__version__


class Tensor:
    """A shape and a device, nothing more: enough for code that only passes tensors along."""

    def __init__(self, shape, device="cpu"):
        self.shape = tuple(shape)
        self.device = device

    def __repr__(self):
        return f"gpuhost-standin-tensor(shape={self.shape}, device={self.device!r})"


def randn(*shape, device="cpu", **_kwargs):
    return Tensor(shape, device)


def softmax(tensor, dim=-1):
    return Tensor(tensor.shape, tensor.device)
