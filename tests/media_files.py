"""Media files for the tests, encoded with PyAV (numpy, soundfile and av only: the torch-free install test
runs this file with its own venv's python).

    python tests/media_files.py SOURCE.flac OUT.m4a   # AAC in .m4a/.mp4, Opus in .webm
"""
from __future__ import annotations

import sys
from pathlib import Path

import av
import numpy as np
import soundfile as sf

CODECS = {".m4a": "aac", ".mp4": "aac", ".webm": "libopus"}


class _Sink:
    """A write-only (so not seekable) output, as a live recorder's: the muxer cannot go back to the header."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> int:
        self.data += bytes(data)
        return len(data)


def encode(wave: np.ndarray, rate: int, path: Path, channels: int = 1, video: bool = False,
           audio: bool = True, live: bool = False) -> Path:
    """Write float32 mono `wave` as the codec CODECS[suffix] picks; channels=2 stores 1.5x and 0.5x the wave
    (their mean is the wave); video adds (or, with audio=False, is the only stream) a tiny 32x32 picture;
    live writes it without seeking back (a webm then has no duration in its header)."""
    layout = "mono" if channels == 1 else "stereo"
    codec = CODECS[path.suffix]
    sink = _Sink() if live else None
    with av.open(sink or str(path), "w", format=path.suffix[1:] if live else None) as out:  # streams first
        sound = out.add_stream(codec, rate=48000 if codec == "libopus" else rate, layout=layout) if audio else None
        pictures = out.add_stream("mpeg4", rate=10, width=32, height=32, pix_fmt="yuv420p") if video else None
        if sound:
            data = wave[None] if channels == 1 else np.stack([wave * 1.5, wave * 0.5])
            frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(data, np.float32), format="fltp", layout=layout)
            frame.rate, frame.pts = rate, 0
            for packet in [*sound.encode(frame), *sound.encode(None)]:  # PyAV cuts it into codec frames
                out.mux(packet)
        if pictures:
            for i in range(round(wave.size / rate * 10)):
                frame = av.VideoFrame.from_ndarray(np.full((32, 32, 3), i * 8 % 256, np.uint8), format="rgb24")
                frame.pts = i
                out.mux(pictures.encode(frame))
            out.mux(pictures.encode(None))
    if sink:
        path.write_bytes(sink.data)
    return path


if __name__ == "__main__":
    samples, sample_rate = sf.read(sys.argv[1], dtype="float32")
    encode(samples, sample_rate, Path(sys.argv[2]))
