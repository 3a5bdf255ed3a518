"""One connection's audio path: samples at the client's rate in, 500 ms chunks at 16 kHz out."""
from __future__ import annotations

import numpy as np

from asr.audio import SAMPLE_RATE, Chunker, StreamingResampler


class AudioBuffer:
    """Resamples (if the client's rate is not 16 kHz) and cuts the audio into chunks of exactly
    `chunk_samples` (`asr.audio.Chunker`, as `asr.stream --file` does through `rechunk`)."""

    def __init__(self, chunk_samples: int, rate: int = SAMPLE_RATE):
        self.chunker = Chunker(chunk_samples)
        self.resampler = StreamingResampler(rate) if rate != SAMPLE_RATE else None

    def push(self, samples: np.ndarray) -> list[np.ndarray]:
        """More samples at the client's rate -> the full chunks they complete."""
        if self.resampler is not None:
            samples = self.resampler.push(samples)
        return self.chunker.push(samples)

    def flush(self) -> list[np.ndarray]:
        """End of input: the remaining chunks (the last one shorter)."""
        chunks = []
        if self.resampler is not None:
            chunks, self.resampler = self.chunker.push(self.resampler.flush()), None
        return chunks + self.chunker.flush()
