"""The one feature extractor: 80-dim log-mel filterbanks, 25 ms window, 10 ms hop, 16 kHz.

Every frame is computed from its own 400 samples only (no centring, no padding, no
per-utterance statistics), so feeding a waveform in arbitrary pieces through
`stream_fbank` gives exactly the frames `Fbank` gives for the whole waveform.
Normalisation uses global mean/std stored with the model (`GlobalCMVN`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torchaudio
from torch import Tensor, nn


@dataclass
class FbankConfig:
    sample_rate: int = 16000
    n_mels: int = 80
    win_length: int = 400  # 25 ms
    hop_length: int = 160  # 10 ms
    n_fft: int = 512
    f_min: float = 20.0
    f_max: float = 7600.0


def num_frames(num_samples: int, cfg: FbankConfig) -> int:
    """Frames a waveform of `num_samples` yields: one per full 25 ms window every 10 ms."""
    if num_samples < cfg.win_length:
        return 0
    return 1 + (num_samples - cfg.win_length) // cfg.hop_length


class Fbank(nn.Module):
    """Waveform (B, N) at 16 kHz -> log-mel frames (B, T, n_mels), T = num_frames(N)."""

    def __init__(self, cfg: FbankConfig = FbankConfig()):
        super().__init__()
        self.cfg = cfg
        self.register_buffer("window", torch.hann_window(cfg.win_length), persistent=False)
        mel = torchaudio.functional.melscale_fbanks(
            cfg.n_fft // 2 + 1, cfg.f_min, cfg.f_max, cfg.n_mels, cfg.sample_rate, norm=None, mel_scale="htk")
        self.register_buffer("mel", mel, persistent=False)  # (n_fft/2+1, n_mels)

    def forward(self, wave: Tensor) -> Tensor:
        cfg = self.cfg
        if wave.shape[-1] < cfg.win_length:
            return wave.new_zeros(wave.shape[0], 0, cfg.n_mels)
        frames = wave.unfold(-1, cfg.win_length, cfg.hop_length)  # (B, T, win)
        frames = frames - frames.mean(dim=-1, keepdim=True)  # remove DC per frame
        spectrum = torch.fft.rfft(frames * self.window, n=cfg.n_fft)  # (B, T, n_fft/2+1)
        power = spectrum.real.square() + spectrum.imag.square()
        return torch.log(power @ self.mel + 1e-6)  # (B, T, n_mels)


def stream_fbank(fbank: Fbank, samples: Tensor, pending: Tensor) -> tuple[Tensor, Tensor]:
    """Incremental `Fbank` for one stream: chunks of any length in, exactly the offline frames out.

    samples (N,) new audio; pending (P,) samples carried from the last call (P < 400 + 160).
    Returns (new frames (T_new, n_mels), samples to carry to the next call).
    """
    cfg = fbank.cfg
    buffer = torch.cat([pending, samples.to(pending.dtype)])
    count = num_frames(buffer.numel(), cfg)
    if count == 0:
        return buffer.new_zeros(0, cfg.n_mels), buffer
    used = buffer[: (count - 1) * cfg.hop_length + cfg.win_length]
    return fbank(used[None])[0], buffer[count * cfg.hop_length:]


class GlobalCMVN(nn.Module):
    """Normalise features with dataset-wide mean and std (never per utterance)."""

    def __init__(self, n_mels: int = 80):
        super().__init__()
        self.register_buffer("mean", torch.zeros(n_mels))
        self.register_buffer("std", torch.ones(n_mels))

    def set_stats(self, mean: Tensor, std: Tensor) -> None:
        self.mean.copy_(mean)
        self.std.copy_(std.clamp_min(1e-3))

    def forward(self, feats: Tensor) -> Tensor:
        return (feats - self.mean) / self.std
