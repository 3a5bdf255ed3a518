"""Reading audio: any rate, mono or stereo, wav/flac/ogg/mp3 (soundfile) or any other media ffmpeg reads
(m4a, mp4, webm, video files..., through PyAV in asr.media), a file or `-` (stdin) -> 16 kHz mono float32."""
from __future__ import annotations

import math
from pathlib import Path
from types import ModuleType
from typing import Iterable, Iterator

import numpy as np
import soundfile as sf

from asr.interrupt import STOP

SAMPLE_RATE = 16000
BLOCK_FRAMES = 1 << 16  # samples read from a file at a time (at its own rate)
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".oga", ".opus", ".mp3", ".aiff", ".aif", ".au",  # soundfile
                  ".m4a", ".mp4", ".m4v", ".mov", ".mkv", ".mka", ".webm", ".aac", ".ac3", ".wma", ".wmv",
                  ".avi", ".amr", ".3gp", ".mpg", ".mpeg")  # PyAV (asr.media): folders list these too
STDIN, STDIN_NAME = "-", "- (stdin)"  # as a path: standard input; its name in error messages


class AudioError(Exception):
    """A file that cannot be read as audio; the message names the file and the reason."""


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


def read_blocks(path: str | Path, block_frames: int = BLOCK_FRAMES) -> Iterator[np.ndarray]:
    """A file of any rate, channels and length as 16 kHz mono float32 pieces, read block-wise.
    soundfile reads what libsndfile reads (wav, flac, ogg, mp3...); anything else (m4a, mp4, webm,
    video files...) and `-` (standard input, decoded as it arrives) go through PyAV (asr.media).
    Raises AudioError (file + reason), also for a file that breaks part-way."""
    if str(path) == STDIN:
        media = _media(STDIN)
        yield from _at_16k(STDIN_NAME, media.decode(media.stdin_source(), STDIN_NAME))
        return
    path = Path(path)
    if not path.exists():
        raise AudioError(f"{path}: no such file")
    if path.is_dir():
        raise AudioError(f"{path}: is a directory")
    _refuse_empty(path)
    try:
        audio = sf.SoundFile(str(path))
    except Exception as err:  # soundfile raises several types for bad data: let ffmpeg try
        pieces = _media(path, err).decode(path, str(path), block_frames)
    else:
        pieces = _soundfile_pieces(audio, path, block_frames)
    yield from _at_16k(str(path), pieces)


def _refuse_empty(path: Path) -> None:
    """AudioError for a file of no bytes at all, which the readers would call invalid data."""
    if path.is_file() and path.stat().st_size == 0:
        raise AudioError(f"{path}: the file is empty")


def _soundfile_pieces(audio: sf.SoundFile, path: Path, block_frames: int) -> Iterator[tuple[int, np.ndarray]]:
    """(rate, mono float32 block) from an open soundfile, `block_frames` samples at a time."""
    with audio:
        if audio.format == "WAV" and (truncated := _wav_truncation(path)):
            raise AudioError(f"{path}: {truncated}")
        total = 0
        while not STOP.is_set():  # Ctrl-C in a tool ends the input here (asr.interrupt)
            try:
                block = audio.read(block_frames, dtype="float32", always_2d=True)
            except Exception as err:
                raise AudioError(f"{path}: read failed after {total} samples ({_first_line(err)})") from None
            if block.shape[0] == 0:
                return
            total += block.shape[0]
            yield audio.samplerate, block.mean(axis=1)


def _at_16k(name: str, pieces: Iterable[tuple[int, np.ndarray]]) -> Iterator[np.ndarray]:
    """(rate, mono samples) pieces -> 16 kHz float32 pieces, resampled block-wise; AudioError for
    non-finite samples or none at all."""
    resampler, total = None, 0
    for rate, mono in pieces:
        if not np.isfinite(mono).all():
            raise AudioError(f"{name}: contains invalid (NaN or infinite) samples")
        if total == 0 and rate != SAMPLE_RATE:
            resampler = StreamingResampler(rate)
        total += mono.size
        yield resampler.push(mono) if resampler else mono
    if total == 0 and not STOP.is_set():
        raise AudioError(f"{name}: contains no audio samples")
    if resampler:
        yield resampler.flush()


def _media(path: str | Path, soundfile_error: Exception | None = None) -> ModuleType:
    """asr.media (PyAV), imported on first use; AudioError if PyAV is not installed."""
    try:
        from asr import media
    except ImportError as err:
        reason = f"{_first_line(soundfile_error)}; " if soundfile_error else ""
        name = STDIN_NAME if str(path) == STDIN else str(path)
        raise AudioError(f"{name}: not readable audio ({reason}PyAV, which reads other media, "
                         f"is not installed: {_first_line(err)})") from None
    return media


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


def audio_duration(path: str | Path) -> float:
    """Seconds of audio in a file from its header (fast: no samples decoded; a media file without a
    duration in its header has its packets read, still without decoding). Raises AudioError (file +
    reason) for a file that cannot be read as audio, and for `-`: standard input's length is unknown
    until it ends (and reading it here would consume it)."""
    if str(path) == STDIN:
        raise AudioError(f"{STDIN_NAME}: duration unknown until the input ends")
    path = Path(path)
    if not path.is_file():
        raise AudioError(f"{path}: no such file")
    _refuse_empty(path)
    try:
        return float(sf.info(str(path)).duration)
    except Exception as err:
        return _media(path, err).duration(path)


def load_audio(path: str | Path) -> np.ndarray:
    """Read a whole file as 16 kHz mono float32 (N,). Raises AudioError with a one-line reason."""
    return np.concatenate(list(read_blocks(path)))


class Chunker:
    """Cuts samples that arrive in pieces of any length into float32 chunks of exactly `size` samples
    (a push interface: `rechunk` for iterables, the server's per-connection buffer)."""

    def __init__(self, size: int):
        self.size = size
        self.buffer = np.zeros(0, np.float32)

    def push(self, samples: np.ndarray) -> list[np.ndarray]:
        """More samples -> the full chunks they complete (the rest waits for the next push)."""
        self.buffer = np.concatenate([self.buffer, np.asarray(samples, dtype=np.float32).reshape(-1)])
        count = self.buffer.size // self.size
        chunks = [self.buffer[i * self.size:(i + 1) * self.size] for i in range(count)]
        self.buffer = self.buffer[count * self.size:]
        return chunks

    def flush(self) -> list[np.ndarray]:
        """End of input: what is left, as one shorter chunk (none if nothing is)."""
        rest, self.buffer = self.buffer, np.zeros(0, np.float32)
        return [rest] if rest.size else []


def rechunk(pieces: Iterable[np.ndarray], size: int, max_samples: int | None = None) -> Iterator[np.ndarray]:
    """Pieces of any length -> float32 chunks of exactly `size` samples (the last may be shorter),
    stopping after `max_samples` samples if given."""
    chunker, taken = Chunker(size), 0
    for piece in pieces:
        piece = np.asarray(piece, dtype=np.float32).reshape(-1)
        if max_samples is not None:
            piece = piece[: max_samples - taken]
        taken += piece.size
        yield from chunker.push(piece)
        if max_samples is not None and taken >= max_samples:
            break
    yield from chunker.flush()
