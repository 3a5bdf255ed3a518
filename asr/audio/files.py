"""Reading audio: any rate, mono or stereo, wav/flac/ogg/mp3 (soundfile) or any other media ffmpeg reads
(m4a, mp4, webm, video files..., through PyAV in asr.audio.media), a file or `-` (stdin) -> 16 kHz mono float32."""
from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType
from typing import Iterable, Iterator

import numpy as np
import soundfile as sf

from asr.audio import SAMPLE_RATE, STDIN, STDIN_NAME, AudioError, first_line
from asr.audio.interrupt import STOP
from asr.audio.resample import StreamingResampler

log = logging.getLogger("asr.audio")  # warnings: each tool shows them as `asr.TOOL: warning: ...` (asr.cli)
BLOCK_FRAMES = 1 << 16  # samples read from a file at a time (at its own rate)
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".oga", ".opus", ".mp3", ".aiff", ".aif", ".au",  # soundfile
                  ".m4a", ".mp4", ".m4v", ".mov", ".mkv", ".mka", ".webm", ".aac", ".ac3", ".wma", ".wmv",
                  ".avi", ".amr", ".3gp", ".mpg", ".mpeg")  # PyAV (asr.audio.media): folders list these too


def read_blocks(path: str | Path, block_frames: int = BLOCK_FRAMES) -> Iterator[np.ndarray]:
    """A file of any rate, channels and length as 16 kHz mono float32 pieces, read block-wise.
    soundfile reads what libsndfile reads (wav, flac, ogg, mp3...); anything else (m4a, mp4, webm,
    video files...) and `-` (standard input, decoded as it arrives) go through PyAV (asr.audio.media).
    Raises AudioError (file + reason), also for a file that breaks part-way. A WAV file cut short (a recording
    that was stopped, a copy that did not finish) is read up to where it ends, with a warning."""
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
            log.warning("%s: %s: read up to where it ends", path, truncated)
        total = 0
        while not STOP.is_set():  # Ctrl-C in a tool ends the input here (asr.audio.interrupt)
            try:
                block = audio.read(block_frames, dtype="float32", always_2d=True)
            except Exception as err:
                raise AudioError(f"{path}: read failed after {total} samples ({first_line(err)})") from None
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
    """asr.audio.media (PyAV), imported on first use; AudioError if PyAV is not installed."""
    try:
        from asr.audio import media
    except ImportError as err:
        reason = f"{first_line(soundfile_error)}; " if soundfile_error else ""
        name = STDIN_NAME if str(path) == STDIN else str(path)
        raise AudioError(f"{name}: not readable audio ({reason}PyAV, which reads other media, "
                         f"is not installed: {first_line(err)})") from None
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
