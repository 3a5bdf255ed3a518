"""Media files and pipes through PyAV (ffmpeg's demuxers and decoders): m4a, mp4, webm, mkv, video files...

The first audio stream is decoded (video streams are skipped) to float32 and mixed to mono at its own
rate; asr.audio.files resamples it to 16 kHz, and imports this module (and so `av`) only when a file
is not one that soundfile reads, or for standard input.
"""
from __future__ import annotations

import fcntl
import os
import select
import struct
import sys
import termios
from pathlib import Path
from typing import BinaryIO, Iterator

import av
import numpy as np

from asr.audio import STDIN_NAME, AudioError, first_line
from asr.audio.interrupt import STOP


class _Pipe:
    """A non-seekable reader that returns what has arrived (at most `size` bytes) rather than
    waiting for `size` bytes, so decoding keeps pace with a live pipe. Ctrl-C in a tool (asr.audio.interrupt) is
    the end of the input: the bytes already in the pipe then are read, nothing after them. PyAV would swallow
    an exception raised in its read callback, so a KeyboardInterrupt is kept here (`interrupted`) and raised
    again once PyAV has returned."""

    def __init__(self, stream: BinaryIO):
        self.read_some = getattr(stream, "read1", stream.read)
        try:
            self.fd: int | None = stream.fileno()
        except (OSError, AttributeError, ValueError):  # a stand-in without a descriptor: plain reads
            self.fd = None
        self.received = 0  # bytes read so far
        self.interrupted = False  # KeyboardInterrupt came while waiting for bytes
        self.left: int | None = None  # after Ctrl-C: the bytes that were in the pipe then, still to read

    def read(self, size: int = -1) -> bytes:
        size = size if size > 0 else 1 << 16
        try:
            while self.fd is not None and not STOP.is_set() and not select.select([self.fd], [], [], 0.1)[0]:
                pass  # waiting for bytes, looking at STOP every 0.1 s
            if STOP.is_set():
                if self.left is None:
                    self.left = _waiting_bytes(self.fd)
                size = min(size, self.left)
                if not size:
                    return b""
            data = os.read(self.fd, size) if self.fd is not None else self.read_some(size)
            self.received += len(data)
            if self.left is not None:
                self.left -= len(data)
            return data
        except KeyboardInterrupt:
            self.interrupted = True
            return b""


def _waiting_bytes(fd: int | None) -> int:
    """The bytes waiting in a pipe to be read (0 where that cannot be known)."""
    try:
        return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0] if fd is not None else 0
    except OSError:
        return 0


def _reason(err: Exception) -> str:
    """ffmpeg's own words without the file name that PyAV appends."""
    return getattr(err, "strerror", None) or first_line(err)


def _open(source: Path | BinaryIO, name: str) -> tuple[av.container.InputContainer, av.audio.stream.AudioStream]:
    """The container and its first audio stream; AudioError if either is missing."""
    try:
        container = av.open(source if not isinstance(source, Path) else str(source), metadata_errors="ignore")
    except (av.FFmpegError, OSError, ValueError, UnicodeDecodeError) as err:
        _raise_if_interrupted(source)
        if STOP.is_set():  # Ctrl-C before the input held anything to read: nothing was heard
            raise KeyboardInterrupt from None
        if isinstance(source, _Pipe) and source.received == 0:
            raise AudioError(f"{name}: the input is empty") from None
        raise AudioError(f"{name}: not readable audio ({_reason(err)})") from None
    if not container.streams.audio:
        kinds = sorted({s.type for s in container.streams})
        container.close()
        raise AudioError(f"{name}: no audio stream in this file ({', '.join(kinds) or 'no'} streams only)")
    return container, container.streams.audio[0]


def _raise_if_interrupted(source: object) -> None:
    """KeyboardInterrupt again if it came inside PyAV's read from the pipe `source` (see _Pipe)."""
    if isinstance(source, _Pipe) and source.interrupted:
        raise KeyboardInterrupt


def stdin_source() -> BinaryIO | _Pipe:
    """Standard input as PyAV reads it: the file itself when it is redirected from one (seekable),
    else a pipe read as the bytes arrive."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise AudioError(f"{STDIN_NAME}: standard input is closed or not binary")
    if stream.isatty():
        raise AudioError(f"{STDIN_NAME}: standard input is a terminal (pipe or redirect audio into it)")
    if not stream.seekable():
        return _Pipe(stream)
    at = stream.tell()
    end = stream.seek(0, os.SEEK_END)
    stream.seek(at)
    if end == at:  # redirected from an empty file
        raise AudioError(f"{STDIN_NAME}: the input is empty")
    return stream


def mono(frame: av.AudioFrame) -> np.ndarray:
    """One decoded frame -> float32 (samples,): the mean of its channels, integers scaled to [-1, 1)."""
    data = frame.to_ndarray()
    if not frame.format.is_planar:  # interleaved: (1, samples * channels)
        data = data.reshape(-1, frame.layout.nb_channels).T
    if data.dtype.kind == "u":  # u8: unsigned, centred at 128
        data = data.astype(np.float32) / 128.0 - 1.0
    elif data.dtype.kind == "i":
        data = data.astype(np.float32) / float(np.iinfo(data.dtype).max + 1)
    return data.mean(axis=0).astype(np.float32, copy=False)


def decode(source: Path | BinaryIO, name: str, group: int = 1) -> Iterator[tuple[int, np.ndarray]]:
    """(sample rate, mono float32 samples) pieces of the first audio stream, each at least `group`
    samples long (but the last), decoded as the bytes are read. Raises AudioError (name + reason)."""
    container, stream = _open(source, name)
    pieces: list[np.ndarray] = []
    held = total = 0
    rate: int | None = None
    try:
        for frame in container.decode(stream):
            if STOP.is_set() and not isinstance(source, _Pipe):  # Ctrl-C: a file ends here (a pipe ends itself)
                break
            if rate is not None and frame.sample_rate != rate:
                raise AudioError(f"{name}: the sample rate changes part-way ({rate} -> {frame.sample_rate} Hz)")
            rate = frame.sample_rate
            pieces.append(mono(frame))
            held += pieces[-1].size
            if held >= group:
                total += held
                yield rate, np.concatenate(pieces)
                pieces, held = [], 0
    except (av.FFmpegError, OSError, ValueError) as err:
        _raise_if_interrupted(source)
        if not STOP.is_set():  # (Ctrl-C may cut a pipe inside a packet: the input ends there)
            hint = ""
            if isinstance(source, _Pipe) and "mp4" in container.format.name:
                hint = "; from a pipe an mp4/m4a needs its index (moov) first: give its path or redirect it with < FILE"
            raise AudioError(f"{name}: read failed after {total + held} samples ({_reason(err)}{hint})") from None
    finally:
        container.close()
    _raise_if_interrupted(source)  # PyAV took the interrupted read for the end of the input
    if held:
        yield rate, np.concatenate(pieces)


def duration(path: Path) -> float:
    """Seconds of the first audio stream: from the header where it says, else by reading the packets'
    durations (no decoding). Raises AudioError."""
    container, stream = _open(path, str(path))
    with container:
        if stream.duration and stream.time_base:
            return float(stream.duration * stream.time_base)
        if container.duration:
            return container.duration / av.time_base
        try:
            ticks = sum(packet.duration or 0 for packet in container.demux(stream))
        except (av.FFmpegError, OSError, ValueError) as err:
            raise AudioError(f"{path}: not readable audio ({_reason(err)})") from None
        return float(ticks * stream.time_base) if stream.time_base else 0.0
