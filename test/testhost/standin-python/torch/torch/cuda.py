"""The stand-in torch.cuda: reports the GPUs a test asks for (GPUHOST_STANDIN_GPUS, default 1)."""
import os


def is_available():
    return device_count() > 0


def device_count():
    return int(os.environ.get("GPUHOST_STANDIN_GPUS", "1"))


def synchronize():
    return None


def get_device_capability(_device=0):
    # the story's RTX PRO 6000 Blackwell: SM 12.0
    return (12, 0)
