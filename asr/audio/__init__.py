"""Audio in: files, media, the microphone -> 16 kHz mono float32, resampled and cut into chunks.

    files       read_blocks, load_audio, audio_duration: soundfile, and PyAV (`media`) for anything else
    media       ffmpeg's demuxers and decoders through PyAV: m4a, mp4, webm, video files, standard input
    microphone  live input through sounddevice (PortAudio)
    resample    exact block-wise sinc resampling to 16 kHz
    chunks      pieces of any length -> chunks of exactly N samples

What every one of them shares is here: the rate, the name of standard input, and the error.
"""
from __future__ import annotations

SAMPLE_RATE = 16000
STDIN, STDIN_NAME = "-", "- (stdin)"  # as a path: standard input; its name in error messages


class AudioError(Exception):
    """A file that cannot be read as audio; the message names the file and the reason."""


def first_line(err: Exception | None) -> str:
    """The first line of an exception's message (its type's name when it has none), for one-line errors."""
    return str(err).splitlines()[0] if str(err) else type(err).__name__
