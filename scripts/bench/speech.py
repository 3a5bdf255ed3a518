"""The speech the server benchmarks stream (serve.py, soak.py, ceiling.py): the shipped examples in a loop, each
followed by 0.6 s of silence, sent in 100 ms messages as a microphone delivers them."""
from __future__ import annotations

import functools

import numpy as np
import soundfile as sf

from bench.server_process import ROOT

RATE, MESSAGE = 16000, 1600  # 100 ms per message
PAUSE = RATE * 6 // 10  # 0.6 s of silence after each example in the loop
EXAMPLES = sorted((ROOT / "asr" / "examples").glob("*.flac"))


@functools.cache
def speech_loop() -> np.ndarray:
    """The shipped examples in turn, each followed by 0.6 s of silence (int16); read once, never written to."""
    pieces = []
    for path in EXAMPLES:
        pieces += [sf.read(path, dtype="int16")[0], np.zeros(PAUSE, np.int16)]
    return np.concatenate(pieces)


def speech(seconds: float, offset: int) -> np.ndarray:
    """`seconds` of int16 speech: the loop from `offset` samples in, repeated as needed."""
    return np.resize(np.roll(speech_loop(), -offset), round(seconds * RATE))
