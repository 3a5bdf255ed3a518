"""The one feature extractor: 80-dim log-mel filterbanks, 25 ms window, 10 ms hop, 16 kHz, in numpy.

Every frame is computed from its own 400 samples only (no centring, no padding, no per-utterance
statistics), so feeding a waveform in arbitrary pieces through `stream_fbank` gives exactly the
frames `Fbank` gives for the whole waveform. Training, every entry point and every backend use
this one implementation; the model normalises the frames with global statistics it stores.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FbankConfig:
    sample_rate: int = 16000
    n_mels: int = 80
    win_length: int = 400  # 25 ms
    hop_length: int = 160  # 10 ms
    n_fft: int = 512
    f_min: float = 20.0
    f_max: float = 7600.0


def num_frames(num_samples: int, cfg: FbankConfig = FbankConfig()) -> int:
    """Frames a waveform of `num_samples` yields: one per full 25 ms window every 10 ms."""
    if num_samples < cfg.win_length:
        return 0
    return 1 + (num_samples - cfg.win_length) // cfg.hop_length


def _hz_to_mel(hz: np.ndarray) -> np.ndarray:
    return 2595.0 * np.log10(1.0 + hz / 700.0)  # the HTK mel scale


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)


def mel_filters(cfg: FbankConfig) -> np.ndarray:
    """(n_fft/2+1, n_mels) triangular filters, equally spaced on the HTK mel scale, unnormalised."""
    bins = np.linspace(0, cfg.sample_rate // 2, cfg.n_fft // 2 + 1)
    mels = np.linspace(_hz_to_mel(np.float64(cfg.f_min)), _hz_to_mel(np.float64(cfg.f_max)), cfg.n_mels + 2)
    edges = _mel_to_hz(mels)  # (n_mels + 2,) lower edge, centre, upper edge of each filter
    widths = np.diff(edges)
    slopes = edges[None, :] - bins[:, None]  # (bins, n_mels + 2)
    rising = -slopes[:, :-2] / widths[:-1]
    falling = slopes[:, 2:] / widths[1:]
    return np.maximum(0.0, np.minimum(rising, falling)).astype(np.float32)


class Fbank:
    """Waveform (N,) or (B, N) float32 at 16 kHz -> log-mel frames (T, n_mels) or (B, T, n_mels)."""

    def __init__(self, cfg: FbankConfig = FbankConfig()):
        self.cfg = cfg
        n = np.arange(cfg.win_length)
        self.window = (0.5 - 0.5 * np.cos(2 * np.pi * n / cfg.win_length)).astype(np.float32)  # periodic Hann
        self.mel = mel_filters(cfg)

    def __call__(self, wave: np.ndarray) -> np.ndarray:
        cfg = self.cfg
        wave = np.asarray(wave, dtype=np.float32)
        count = num_frames(wave.shape[-1], cfg)
        if count == 0:
            return np.zeros((*wave.shape[:-1], 0, cfg.n_mels), np.float32)
        frames = np.lib.stride_tricks.sliding_window_view(wave, cfg.win_length, axis=-1)[..., ::cfg.hop_length, :]
        frames = frames[..., :count, :]  # (..., T, win)
        frames = frames - frames.mean(axis=-1, keepdims=True)  # remove DC per frame
        spectrum = np.fft.rfft(frames * self.window, n=cfg.n_fft)  # (..., T, n_fft/2+1) complex64
        power = spectrum.real ** 2 + spectrum.imag ** 2
        return np.log(power @ self.mel + np.float32(1e-6)).astype(np.float32)


def stream_fbank(fbank: Fbank, samples: np.ndarray, pending: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Incremental `Fbank` for one stream: chunks of any length in, exactly the offline frames out.

    samples (N,) new audio; pending (P,) samples carried from the last call (P < 400 + 160).
    Returns (new frames (T_new, n_mels), samples to carry to the next call).
    """
    cfg = fbank.cfg
    buffer = np.concatenate([pending, np.asarray(samples, dtype=np.float32)])
    count = num_frames(buffer.size, cfg)
    if count == 0:
        return np.zeros((0, cfg.n_mels), np.float32), buffer
    used = buffer[: (count - 1) * cfg.hop_length + cfg.win_length]
    return fbank(used), buffer[count * cfg.hop_length:]
