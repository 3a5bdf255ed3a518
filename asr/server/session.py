"""One connection's audio path: samples at the client's rate in, the steps to run at 16 kHz out, their emissions."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, AsyncIterator

import numpy as np

from asr.audio import SAMPLE_RATE
from asr.audio.resample import StreamingResampler
from asr.decoding.stepping import Stepper
from asr.server import metrics

if TYPE_CHECKING:
    from asr.decoding.endpoint import Emission
    from asr.server.engine import Engine
    from asr.server.recognition import Stream


class AudioBuffer:
    """Resamples (if the client's rate is not 16 kHz) and plans the model's steps (`asr.decoding.stepping`):
    a step with a partial every `chunk_samples` (as `asr.stream --file` cuts its chunks), and in
    between, as soon as the audio holds a pending final's endpoint, a step that brings it out."""

    def __init__(self, chunk_samples: int, rate: int = SAMPLE_RATE):
        self.stepper = Stepper(chunk_samples)
        self.resampler = StreamingResampler(rate) if rate != SAMPLE_RATE else None

    def push(self, samples: np.ndarray) -> None:
        """More samples at the client's rate."""
        self.stepper.push(self.resampler.push(samples) if self.resampler is not None else samples)

    def end(self) -> None:
        """End of input: what is left becomes the last (shorter) chunk."""
        if self.resampler is not None:
            self.stepper.push(self.resampler.flush())
            self.resampler = None
        self.stepper.end()

    def next(self, due: int | None) -> tuple[np.ndarray, bool] | None:
        """The next step as (16 kHz samples, whether a partial follows it), or None until more audio comes;
        `due`: where a pending final's endpoint may fire (stream samples), if one is pending."""
        return self.stepper.next(due)

    @property
    def heard(self) -> int:
        """16 kHz samples received so far."""
        return self.stepper.received


async def stepped(engine: Engine, stream: Stream, buffer: AudioBuffer, since: float) -> AsyncIterator[Emission]:
    """Every step the audio received so far allows (`AudioBuffer.next`), through the engine: the steps' emissions in
    order, the event latency since `since` (`time.perf_counter`) observed once each step's emissions are taken."""
    while (step := buffer.next(engine.recognition.due(stream))) is not None:
        for emission in await engine.step(stream, *step):
            yield emission
        metrics.LATENCY.observe(time.perf_counter() - since)
