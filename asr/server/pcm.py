"""Raw PCM as clients send it (any rate, 1, 2 or 4 bytes a sample, interleaved channels) -> mono float32."""
from __future__ import annotations

import numpy as np

from asr.server.protocol import MAX_RATE, MIN_RATE

WIDTHS = (1, 2, 4)  # bytes per sample: unsigned 8-bit, signed 16- and 32-bit little-endian
MAX_CHANNELS = 32


def check_format(rate: object, width: object, channels: object) -> tuple[int, int, int]:
    """(rate, width, channels) when this module can read them; ValueError with a one-line reason otherwise."""
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (rate, width, channels)):
        raise ValueError(f"rate, width and channels must be integers (got {rate!r}, {width!r}, {channels!r})")
    if not MIN_RATE <= rate <= MAX_RATE:
        raise ValueError(f"rate must be in {MIN_RATE}..{MAX_RATE} Hz (got {rate})")
    if width not in WIDTHS:
        raise ValueError(f"width must be 1, 2 or 4 bytes (got {width})")
    if not 1 <= channels <= MAX_CHANNELS:
        raise ValueError(f"channels must be in 1..{MAX_CHANNELS} (got {channels})")
    return rate, width, channels


def samples(data: bytes, width: int, channels: int) -> np.ndarray:
    """Interleaved little-endian PCM -> mono float32 in [-1, 1), channels averaged (as `asr.audio` reads files);
    ValueError for a partial frame."""
    if len(data) % (width * channels):
        raise ValueError(f"{len(data)} bytes are not a whole number of {width}-byte, {channels}-channel frames")
    if width == 1:
        out = (np.frombuffer(data, np.uint8).astype(np.float32) - 128.0) / 128.0
    else:
        out = (np.frombuffer(data, f"<i{width}").astype(np.float64) / 2.0 ** (8 * width - 1)).astype(np.float32)
    return out.reshape(-1, channels).mean(axis=1, dtype=np.float32) if channels > 1 else out
