"""Reading audio: any rate, mono or stereo, wav/flac/ogg (soundfile) -> 16 kHz mono float32."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import soundfile as sf
import torch
import torchaudio

SAMPLE_RATE = 16000
BLOCK_FRAMES = 1 << 16  # samples read from a file at a time (at its own rate)
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


class StreamingResampler:
    """torchaudio's sinc resampling computed block by block: the output equals
    `torchaudio.functional.resample` on the whole signal (to float rounding), in bounded memory."""

    def __init__(self, rate: int, new_rate: int = SAMPLE_RATE):
        resample = torchaudio.transforms.Resample(rate, new_rate)
        self.kernel, self.width = resample.kernel, resample.width  # (new, 1, K), zero padding
        gcd = math.gcd(rate, new_rate)
        self.orig, self.new = rate // gcd, new_rate // gcd
        self.buffer = torch.zeros(self.width)  # the left zero padding torchaudio adds
        self.seen = self.emitted = 0

    def _convolve(self) -> torch.Tensor:
        size = self.kernel.shape[-1]
        steps = (self.buffer.numel() - size) // self.orig + 1 if self.buffer.numel() >= size else 0
        if steps == 0:
            return torch.zeros(0)
        used = self.buffer[: (steps - 1) * self.orig + size]
        out = torch.nn.functional.conv1d(used[None, None], self.kernel, stride=self.orig)
        self.buffer = self.buffer[steps * self.orig:]
        return out[0].transpose(0, 1).reshape(-1)

    def push(self, samples: torch.Tensor) -> torch.Tensor:
        """More input samples -> the output samples they complete."""
        self.seen += samples.numel()
        self.buffer = torch.cat([self.buffer, samples])
        out = self._convolve()
        self.emitted += out.numel()
        return out

    def flush(self) -> torch.Tensor:
        """End of input: the remaining output (total length ceil(len * new / orig))."""
        self.buffer = torch.cat([self.buffer, torch.zeros(self.width + self.orig)])
        total = -(-self.seen * self.new // self.orig)
        out = self._convolve()[: max(total - self.emitted, 0)]
        self.emitted += out.numel()
        return out


def read_blocks(path: str | Path, block_frames: int = BLOCK_FRAMES) -> Iterator[torch.Tensor]:
    """A file of any rate, channels and length as 16 kHz mono float32 pieces, read block-wise.
    Raises AudioError (file + reason), also for a file that breaks part-way."""
    path = Path(path)
    if not path.exists():
        raise AudioError(f"{path}: no such file")
    if path.is_dir():
        raise AudioError(f"{path}: is a directory")
    try:
        audio = sf.SoundFile(str(path))
    except Exception as err:  # soundfile raises several types for bad data
        raise AudioError(f"{path}: not readable audio ({_first_line(err)})") from None
    with audio:
        if audio.format == "WAV" and (truncated := _wav_truncation(path)):
            raise AudioError(f"{path}: {truncated}")
        resampler = StreamingResampler(audio.samplerate) if audio.samplerate != SAMPLE_RATE else None
        total = 0
        while True:
            try:
                block = audio.read(block_frames, dtype="float32", always_2d=True)
            except Exception as err:
                raise AudioError(f"{path}: read failed after {total} samples ({_first_line(err)})") from None
            if block.shape[0] == 0:
                break
            if not np.isfinite(block).all():
                raise AudioError(f"{path}: contains invalid (NaN or infinite) samples")
            total += block.shape[0]
            mono = torch.from_numpy(block).mean(dim=1)
            yield resampler.push(mono) if resampler else mono
        if total == 0:
            raise AudioError(f"{path}: contains no audio samples")
        if resampler:
            yield resampler.flush()


def _wav_truncation(path: Path) -> str | None:
    """A reason if a WAV file's data chunk is shorter than its header declares, else None.
    (libsndfile silently reads the part that is there.) Placeholder sizes 0 and 2^32-1, as
    written by recorders that never finished the header, are not checked."""
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    pos = 12
    while pos + 8 <= len(head) and head[:4] == b"RIFF":
        chunk, size = head[pos:pos + 4], int.from_bytes(head[pos + 4:pos + 8], "little")
        if chunk == b"data":
            held = path.stat().st_size - pos - 8
            if size not in (0, 0xFFFFFFFF) and held < size:
                return f"truncated file (header declares {size} bytes of samples, the file holds {held})"
            return None
        pos += 8 + size + (size & 1)
    return None


def _first_line(err: Exception) -> str:
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def load_audio(path: str | Path) -> torch.Tensor:
    """Read a whole file as 16 kHz mono float32 (N,). Raises AudioError with a one-line reason."""
    return torch.cat(list(read_blocks(path)))


def rechunk(pieces: Iterable[torch.Tensor], size: int, max_samples: int | None = None) -> Iterator[torch.Tensor]:
    """Pieces of any length -> chunks of exactly `size` samples (the last may be shorter),
    stopping after `max_samples` samples if given."""
    buffer, taken = torch.zeros(0), 0
    for piece in pieces:
        if max_samples is not None:
            piece = piece[: max_samples - taken]
        taken += piece.numel()
        buffer = torch.cat([buffer, piece])
        while buffer.numel() >= size:
            yield buffer[:size]
            buffer = buffer[size:]
        if max_samples is not None and taken >= max_samples:
            break
    if buffer.numel():
        yield buffer
