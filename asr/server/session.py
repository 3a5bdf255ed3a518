"""One connection's audio path: samples at the client's rate in, 500 ms chunks at 16 kHz out."""
from __future__ import annotations

import numpy as np

from asr.audio import SAMPLE_RATE, StreamingResampler


class AudioBuffer:
    """Resamples (if the client's rate is not 16 kHz) and cuts the audio into chunks of exactly
    `chunk_samples`, like `asr.audio.rechunk` does for `asr.stream --file`."""

    def __init__(self, chunk_samples: int, rate: int = SAMPLE_RATE):
        self.chunk_samples = chunk_samples
        self.resampler = StreamingResampler(rate) if rate != SAMPLE_RATE else None
        self.buffer = np.zeros(0, dtype=np.float32)

    def push(self, samples: np.ndarray) -> list[np.ndarray]:
        """More samples at the client's rate -> the full chunks they complete."""
        if self.resampler is not None:
            samples = np.asarray(self.resampler.push(samples), dtype=np.float32)
        self.buffer = np.concatenate([self.buffer, samples])
        count = len(self.buffer) // self.chunk_samples
        chunks = [self.buffer[i * self.chunk_samples:(i + 1) * self.chunk_samples] for i in range(count)]
        self.buffer = self.buffer[count * self.chunk_samples:]
        return chunks

    def flush(self) -> list[np.ndarray]:
        """End of input: the remaining chunks (the last one shorter)."""
        if self.resampler is not None:
            self.buffer = np.concatenate([self.buffer, np.asarray(self.resampler.flush(), dtype=np.float32)])
            self.resampler = None
        chunks = self.push(np.zeros(0, dtype=np.float32))
        if len(self.buffer):
            chunks.append(self.buffer)
            self.buffer = np.zeros(0, dtype=np.float32)
        return chunks
