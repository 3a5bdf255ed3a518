"""Cutting audio that arrives in pieces of any length into chunks of exactly N samples."""
from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np


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
