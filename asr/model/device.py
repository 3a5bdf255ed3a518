"""Which device runs the acoustic model: --device cpu|cuda|cuda:N|auto, checked before anything loads.

The onnx backend runs on the CPU only; the torch backend runs wherever torch can. Nothing here imports
torch unless the torch backend was chosen, so the onnx runtime stays torch-free.
"""
from __future__ import annotations

import re

DEVICES = "cpu, cuda, cuda:N or auto"
_SPELLING = re.compile(r"cpu|auto|cuda(:\d+)?")


class DeviceError(ValueError):
    """A device that cannot be used; the message says why, in one line."""


def check_spelling(device: str | None) -> str | None:
    """`device` if it is one of cpu, cuda, cuda:N, auto (or None); DeviceError otherwise."""
    if device is not None and not _SPELLING.fullmatch(device):
        raise DeviceError(f"--device {device!r}: must be {DEVICES}")
    return device


def wants_gpu(device: str | None) -> bool:
    """Whether `device` names a GPU (cuda or cuda:N), not cpu, auto or None."""
    return check_spelling(device) is not None and device.startswith("cuda")


def for_onnx(device: str | None) -> None:
    """The onnx backend's check: it runs on the CPU (auto means the CPU there); DeviceError for a GPU."""
    if wants_gpu(device):
        raise DeviceError(f"--device {device}: the onnx backend runs on the CPU only; use --backend torch for a GPU")


def torch_device(device: str | None) -> str:
    """The torch device for `device`: auto -> cuda where a GPU is visible, else cpu; None -> cpu. DeviceError for
    cuda where there is none, or a cuda:N beyond the GPUs there are."""
    import torch

    device = check_spelling(device) or "cpu"
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise DeviceError(f"--device {device}: no CUDA GPU is available here (torch sees none); use --device cpu")
        index = int(device.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            raise DeviceError(f"--device {device}: there are only {torch.cuda.device_count()} CUDA GPU(s) here")
    return device


def gpu_visible() -> bool:
    """Whether torch is installed and sees a CUDA GPU (imports torch only where it is installed)."""
    from asr.model.errors import installed

    if not installed("torch"):
        return False
    import torch

    return bool(torch.cuda.is_available())
