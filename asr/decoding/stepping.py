"""When a stream's audio goes through the model: at every chunk boundary, and sooner where a final may be due.

A stream is stepped chunk by chunk (500 ms by default), a partial after each. That alone makes a final
wait for the end of the chunk in which its endpoint falls: on average a quarter of a second beyond
the trailing silence. So between boundaries, once the open segment has decoded something, the audio
already received is stepped as soon as it reaches the point where the endpoint may fire
(`Segmenter.due`, in samples by `Recognizer.samples_for_frames`: for a model with lookahead, the end of the
model's chunk that holds the endpoint's frame), rounded up to a 20 ms grid (fewer
distinct step lengths for the server's batches), unless that is the chunk's end anyway (within 20 ms), and only
if the last 200 ms before that point are quiet (no 20 ms frame louder than a tenth,
-20 dB, of the loudest frame stepped so far): while speech goes on, the endpoint cannot fire there and
the step would be spent for nothing. Such an early step emits the finals it closes and no partial; if
it closes nothing, the boundary's step brings the partial as before. The model's output does not depend on
how a stream is cut into steps (to float rounding), nor do the endpoints (decided frame by frame), so
the results are those of whole chunks: finals only come sooner. The plan is a function of the audio
alone, not of how it arrives, so `asr.stream --file` and the server give the same events.
"""
from __future__ import annotations

import numpy as np

GRID = 320  # samples at 16 kHz: early steps end on a 20 ms grid (fewer distinct step lengths to batch)
GAIN = 320  # an early step is taken only if it comes more than 20 ms before the chunk's end. At 100 ms (before
# 2026-12-07) a stream's first few endpoints waited for the chunk's end: the model's 480 ms chunks end 5, 25, 45 ...
# ms before the 500 ms ones: on 40 speechocean762 train utterances, 17 finals came 5-185 ms later than the model
# allowed (0.045 s on average; the wait for the model's chunk, median 0.30 s, p95 0.48), at 20 ms 4 (0.015 s; 0.24,
# 0.42)
LISTEN = 3200  # ... and the 200 ms before it are quiet:
QUIET = 0.1  # every 20 ms frame's RMS at most this share of the loudest frame's stepped so far


class Stepper:
    """One stream's audio in (any pieces, 16 kHz), the steps to run out: `next` until it says None."""

    def __init__(self, chunk: int, marked: bool = False, grid: int = GRID, gain: int = GAIN):
        """`chunk`: samples per chunk; a boundary every `chunk` samples, or (`marked`) wherever a push says
        so (`push(..., boundary=True)`; chunks of `chunk` samples but for the last). Early steps are
        weighed against the nominal boundaries (multiples of `chunk`), so that the plan is the same
        whether or not the end of the input is known yet."""
        self.chunk, self.marked, self.grid, self.gain = chunk, marked, grid, gain
        self.pieces: list[np.ndarray] = []  # received, not yet stepped
        self.received = 0  # samples pushed so far
        self.stepped = 0  # samples handed out by `next`
        self.boundaries: list[int] = []  # positions (samples) where a step with a partial ends, ascending
        self.partial_at = 0  # where the last step with a partial ended
        self.loudest = 0.0  # RMS of the loudest GRID frame of the audio stepped so far

    def push(self, samples: np.ndarray, boundary: bool = False) -> None:
        """More audio; `boundary` (with `marked`): a chunk ends with it."""
        samples = np.asarray(samples, dtype=np.float32).reshape(-1)
        if samples.size:
            self.pieces.append(samples)
        before, self.received = self.received, self.received + samples.size
        if not self.marked:
            first = (before // self.chunk + 1) * self.chunk
            self.boundaries.extend(range(first, self.received + 1, self.chunk))
        elif boundary:
            self._mark_end()

    def end(self) -> None:
        """End of input: what is left makes a last (shorter) chunk; and if an early step ended right at the
        end, a step of no samples brings the partial that a whole last chunk would have."""
        self._mark_end()

    def _mark_end(self) -> None:
        if self.received > (self.boundaries[-1] if self.boundaries else self.partial_at):
            self.boundaries.append(self.received)

    def next(self, due: int | None = None) -> tuple[np.ndarray, bool] | None:
        """The next step, as (samples, partial), or None to wait for more audio. `due`: the stream position
        (samples) at which the open segment's endpoint may fire; None when no final is pending."""
        cut = self.boundaries[0] if self.boundaries else None
        if due is not None:
            early = -(-due // self.grid) * self.grid
            nominal = (self.stepped // self.chunk + 1) * self.chunk
            if (self.stepped < early <= self.received and early < nominal - self.gain and (cut is None or early < cut)
                    and self._quiet(early)):
                return self._take(early), False
        if cut is None:
            return None
        self.boundaries.pop(0)
        self.partial_at = cut
        return self._take(cut), True

    def _quiet(self, upto: int) -> bool:
        """Whether the LISTEN samples before `upto` (those not yet stepped) are quiet next to the loudest
        audio stepped so far. A function of the audio alone, as the plan must be."""
        start = max(self.stepped, upto - LISTEN)
        audio = np.concatenate(self.pieces)[start - self.stepped:upto - self.stepped] if self.pieces else np.zeros(0)
        return frame_rms(audio).max(initial=0.0) <= QUIET * self.loudest

    def _take(self, upto: int) -> np.ndarray:
        """The samples from the last step's end to `upto`."""
        audio = np.concatenate(self.pieces) if len(self.pieces) > 1 else (self.pieces or [np.zeros(0, np.float32)])[0]
        count = upto - self.stepped
        taken, rest = audio[:count], audio[count:]
        self.pieces = [rest] if rest.size else []
        self.stepped = upto
        self.loudest = max(self.loudest, frame_rms(taken).max(initial=0.0))
        return taken


def frame_rms(audio: np.ndarray) -> np.ndarray:
    """RMS of each GRID-sample frame of `audio` (the last, shorter one included)."""
    if audio.size == 0:
        return np.zeros(0)
    padded = np.zeros(-(-audio.size // GRID) * GRID, np.float64)
    padded[:audio.size] = audio
    return np.sqrt((padded.reshape(-1, GRID) ** 2).mean(axis=1))
