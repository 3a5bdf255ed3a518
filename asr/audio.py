"""Reading audio: any rate, mono or stereo, wav/flac/ogg (soundfile) -> 16 kHz mono float32."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf
import torch
import torchaudio

SAMPLE_RATE = 16000
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".oga", ".opus", ".mp3", ".aiff", ".aif", ".au")


class AudioError(Exception):
    """A file that cannot be read as audio; the message names the file and the reason."""


def to_mono_16k(samples: np.ndarray, rate: int) -> torch.Tensor:
    """(N,) or (N, channels) samples at `rate` -> (N',) float32 at 16 kHz (channels averaged)."""
    wave = torch.from_numpy(np.asarray(samples, dtype=np.float32))
    if wave.ndim == 2:
        wave = wave.mean(dim=1)
    if rate != SAMPLE_RATE:
        wave = torchaudio.functional.resample(wave, rate, SAMPLE_RATE)
    return wave.contiguous()


def load_audio(path: str | Path) -> torch.Tensor:
    """Read a whole file as 16 kHz mono float32 (N,). Raises AudioError with a one-line reason."""
    path = Path(path)
    if not path.exists():
        raise AudioError(f"{path}: no such file")
    if path.is_dir():
        raise AudioError(f"{path}: is a directory")
    try:
        samples, rate = sf.read(str(path), dtype="float32", always_2d=False)
    except Exception as err:  # soundfile raises several types for bad data
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise AudioError(f"{path}: not readable audio ({reason})") from None
    if samples.size == 0:
        raise AudioError(f"{path}: contains no audio samples")
    if not np.isfinite(samples).all():
        raise AudioError(f"{path}: contains invalid (NaN or infinite) samples")
    return to_mono_16k(samples, rate)
