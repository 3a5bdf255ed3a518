"""Resampling to 16 kHz: Hann-windowed sinc interpolation, block by block, equal to resampling the whole signal."""
from __future__ import annotations

import math

import numpy as np

from asr.audio import SAMPLE_RATE


def sinc_kernel(rate: int, new_rate: int, zero_crossings: int = 6, rolloff: float = 0.99) -> tuple[np.ndarray, int]:
    """Hann-windowed sinc interpolation filters for rate -> new_rate (both reduced by their gcd):
    (new, 2 * width + orig) float32 taps, one filter per output phase, and `width`, the input
    samples of context on each side. The same design as torchaudio's default resampler."""
    gcd = math.gcd(rate, new_rate)
    orig, new = rate // gcd, new_rate // gcd
    cutoff = min(orig, new) * rolloff  # below both Nyquist rates
    width = math.ceil(zero_crossings * orig / cutoff)
    taps = np.arange(-width, width + orig, dtype=np.float64)[None, :] / orig
    t = (np.arange(0, -new, -1, dtype=np.float64)[:, None] / new + taps) * cutoff
    t = np.clip(t, -zero_crossings, zero_crossings)
    window = np.cos(t * math.pi / zero_crossings / 2) ** 2
    t *= math.pi
    safe = np.where(t == 0, 1.0, t)
    kernel = np.where(t == 0, 1.0, np.sin(safe) / safe) * window * (cutoff / orig)
    return kernel.astype(np.float32), width


class StreamingResampler:
    """Sinc resampling computed block by block: the output equals resampling the whole signal at
    once (to float rounding), in bounded memory."""

    def __init__(self, rate: int, new_rate: int = SAMPLE_RATE):
        self.kernel, self.width = sinc_kernel(rate, new_rate)  # (new, K)
        gcd = math.gcd(rate, new_rate)
        self.orig, self.new = rate // gcd, new_rate // gcd
        self.buffer = np.zeros(self.width, np.float32)  # zero padding before the first sample
        self.seen = self.emitted = 0

    def _convolve(self) -> np.ndarray:
        size = self.kernel.shape[-1]
        steps = (self.buffer.size - size) // self.orig + 1 if self.buffer.size >= size else 0
        if steps == 0:
            return np.zeros(0, np.float32)
        windows = np.lib.stride_tricks.sliding_window_view(self.buffer, size)[::self.orig][:steps]  # (steps, K)
        out = windows @ self.kernel.T  # (steps, new): output samples in time order, row by row
        self.buffer = self.buffer[steps * self.orig:]
        return out.reshape(-1).astype(np.float32)

    def push(self, samples: np.ndarray) -> np.ndarray:
        """More input samples -> the output samples they complete."""
        self.seen += samples.size
        self.buffer = np.concatenate([self.buffer, np.asarray(samples, dtype=np.float32)])
        out = self._convolve()
        self.emitted += out.size
        return out

    def flush(self) -> np.ndarray:
        """End of input: the remaining output (total length ceil(len * new / orig))."""
        self.buffer = np.concatenate([self.buffer, np.zeros(self.width + self.orig, np.float32)])
        total = -(-self.seen * self.new // self.orig)
        out = self._convolve()[: max(total - self.emitted, 0)]
        self.emitted += out.size
        return out


def resample(wave: np.ndarray, rate: int, new_rate: int = SAMPLE_RATE) -> np.ndarray:
    """A whole signal (N,) at `rate` -> float32 at `new_rate`."""
    if rate == new_rate:
        return np.asarray(wave, dtype=np.float32)
    resampler = StreamingResampler(rate, new_rate)
    return np.concatenate([resampler.push(wave), resampler.flush()])
