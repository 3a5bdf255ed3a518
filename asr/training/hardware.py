"""What machine training runs on: the processor's name and flags (/proc/cpuinfo), and the GPU's name."""
from __future__ import annotations

import platform
from pathlib import Path

BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")  # Intel AMX; AVX-512 BF16 (AMD Zen 4, Intel Cooper Lake and later)


def cpuinfo(field: str) -> str | None:
    """The first processor's `field` in /proc/cpuinfo ("model name", "cpu MHz", "flags"), None where there is none."""
    path = Path("/proc/cpuinfo")
    for line in path.read_text().splitlines() if path.exists() else []:
        key, colon, value = line.partition(":")
        if colon and key.strip() == field:
            return value.strip()
    return None


def cpu_name() -> str:
    """The processor's model name (/proc/cpuinfo), else the platform's machine type."""
    return cpuinfo("model name") or platform.machine()


def cpu_has_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware, where bf16 autocast pays: a CRF step of the shipped
    model at one thread was 1.29x faster with AMX and 1.31x with AVX-512 BF16 (recipes/crf/README.md)."""
    flags = (cpuinfo("flags") or "").split()
    return any(flag in flags for flag in BF16_CPU_FLAGS)


def gpu_name() -> str | None:
    import torch  # noqa: PLC0415

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
