"""The one feature extractor: 80-dim log-mel filterbanks, 25 ms window, 10 ms hop, 16 kHz, in numpy.

Two kinds, chosen by the model (`EncoderConfig.features`, stored in its file):
  fbank    natural log of HTK-mel energies over a 512-point FFT, DC removed per frame (the project's own
           models; they normalise the frames with global statistics they store);
  whisper  Whisper's front end: log10 of Slaney-normalised mel energies over a 400-point FFT, floored,
           then (x + 4) / 4. Whisper floors each utterance at its own maximum minus 8, which no stream
           knows in advance; here the floor is fixed (`whisper_floor`).
Every frame is computed from its own 400 samples only (no centring, no padding, no per-utterance
statistics), so feeding a waveform in arbitrary pieces through `stream_fbank` gives exactly the
frames `Fbank` gives for the whole waveform. Training, every entry point and every backend use
this one implementation.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


FEATURES = ("fbank", "whisper")


@dataclass(frozen=True)
class FbankConfig:
    sample_rate: int = 16000
    n_mels: int = 80
    win_length: int = 400  # 25 ms
    hop_length: int = 160  # 10 ms
    n_fft: int = 512
    f_min: float = 20.0
    f_max: float = 7600.0
    kind: str = "fbank"  # fbank | whisper (see the module docstring)
    whisper_floor: float = -6.8  # whisper: the fixed floor of log10 energies. Whisper's is each utterance's maximum
    # minus 8; the median maximum of 60 speechocean762 training utterances is 1.23 (5-95%: 0.16-1.77; 2026-11-28)

    @classmethod
    def of(cls, kind: str) -> "FbankConfig":
        """The front end a model names (`EncoderConfig.features`); ValueError for an unknown kind."""
        if kind == "fbank":
            return cls()
        if kind == "whisper":
            return cls(n_fft=400, f_min=0.0, f_max=8000.0, kind="whisper")
        raise ValueError(f"features={kind!r} must be one of {', '.join(FEATURES)}")


def num_frames(num_samples: int, cfg: FbankConfig = FbankConfig()) -> int:
    """Frames a waveform of `num_samples` yields: one per full 25 ms window every 10 ms."""
    if num_samples < cfg.win_length:
        return 0
    return 1 + (num_samples - cfg.win_length) // cfg.hop_length


SLANEY_BREAK_HZ, SLANEY_HZ_PER_MEL = 1000.0, 200.0 / 3  # linear below 1 kHz, logarithmic above
SLANEY_LOG_STEP = np.log(6.4) / 27.0


def _hz_to_mel(hz: np.ndarray, slaney: bool) -> np.ndarray:
    if not slaney:
        return 2595.0 * np.log10(1.0 + hz / 700.0)  # the HTK mel scale
    linear = hz / SLANEY_HZ_PER_MEL
    above = SLANEY_BREAK_HZ / SLANEY_HZ_PER_MEL + np.log(np.maximum(hz, SLANEY_BREAK_HZ) / SLANEY_BREAK_HZ) / SLANEY_LOG_STEP
    return np.where(hz >= SLANEY_BREAK_HZ, above, linear)


def _mel_to_hz(mel: np.ndarray, slaney: bool) -> np.ndarray:
    if not slaney:
        return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)
    break_mel = SLANEY_BREAK_HZ / SLANEY_HZ_PER_MEL
    return np.where(mel >= break_mel, SLANEY_BREAK_HZ * np.exp(SLANEY_LOG_STEP * (mel - break_mel)),
                    mel * SLANEY_HZ_PER_MEL)


def mel_filters(cfg: FbankConfig) -> np.ndarray:
    """(n_fft/2+1, n_mels) triangular filters equally spaced on the mel scale: HTK's, unnormalised (fbank), or
    Slaney's, each filter scaled to unit area (whisper)."""
    slaney = cfg.kind == "whisper"
    bins = np.linspace(0, cfg.sample_rate // 2, cfg.n_fft // 2 + 1)
    mels = np.linspace(_hz_to_mel(np.float64(cfg.f_min), slaney), _hz_to_mel(np.float64(cfg.f_max), slaney),
                       cfg.n_mels + 2)
    edges = _mel_to_hz(mels, slaney)  # (n_mels + 2,) lower edge, centre, upper edge of each filter
    widths = np.diff(edges)
    slopes = edges[None, :] - bins[:, None]  # (bins, n_mels + 2)
    rising = -slopes[:, :-2] / widths[:-1]
    falling = slopes[:, 2:] / widths[1:]
    filters = np.maximum(0.0, np.minimum(rising, falling))
    if slaney:
        filters = filters * (2.0 / (edges[2:] - edges[:-2]))
    return filters.astype(np.float32)


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
        if cfg.kind == "fbank":
            frames = frames - frames.mean(axis=-1, keepdims=True)  # remove DC per frame
        spectrum = np.fft.rfft(frames * self.window, n=cfg.n_fft)  # (..., T, n_fft/2+1) complex64
        power = spectrum.real ** 2 + spectrum.imag ** 2
        if cfg.kind == "fbank":
            return np.log(power @ self.mel + np.float32(1e-6)).astype(np.float32)
        logmel = np.maximum(np.log10(np.maximum(power @ self.mel, np.float32(1e-10))), np.float32(cfg.whisper_floor))
        return ((logmel + np.float32(4.0)) / np.float32(4.0)).astype(np.float32)


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
