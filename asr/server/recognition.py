"""The one place the server touches the recognizer: many streams, one model, batched steps.

    recognition = Recognition(recognizer, decoder)
    stream = recognition.open()
    emissions = recognition.advance([stream, other], [chunk, other_chunk])  # one batched model pass
    last = recognition.finish(stream)                                       # end of input

Every stream runs the loop of `asr.decoding.endpoint.emissions` (what `asr.stream` prints): one step per
chunk and a partial after it, finals at endpoints, then the tail of silence and the last final.
Only the acoustic model's step is shared (`Recognizer.step_many`); decoding is per stream.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from asr.audio import SAMPLE_RATE
from asr.decoding.decoder import Decoder
from asr.decoding.endpoint import EndpointConfig, Emission, Segmenter, due_sample
from asr.decoding.hotwords import parse_hotwords
from asr.model.recognizer import Recognizer, StreamState
from asr.server import metrics


@dataclass(eq=False)
class Stream:
    """One client's recognizer state, its segments, and how much 16 kHz audio it has stepped."""
    state: StreamState
    segmenter: Segmenter
    heard: int = 0

    @property
    def seconds(self) -> float:
        return self.heard / SAMPLE_RATE


class Recognition:
    """Runs independent streams through one recognizer and one decoder configuration."""

    def __init__(self, recognizer: Recognizer, decoder: Decoder | None = None, endpoint: EndpointConfig | None = None):
        self.recognizer, self.endpoint = recognizer, endpoint
        self.decoder = decoder or Decoder(recognizer.tokenizer)

    def open(self, hotwords: list[str] | None = None, spoken_form: bool = False) -> Stream:
        """A new stream; `hotwords` (lines of a hotword list) replace the server's own list for it
        (HotwordError, or ValueError for a greedy decoder, if they cannot be used); `spoken_form`: its finals
        with numbers as the words said."""
        decoder = self.decoder.spoken() if spoken_form else self.decoder
        if hotwords:
            decoder = decoder.with_hotwords(parse_hotwords(hotwords, "hotwords", self.recognizer.tokenizer))
        segmenter = Segmenter(decoder, self.recognizer.frame_seconds, self.endpoint, self.recognizer.lookahead_frames)
        return Stream(self.recognizer.initial_state(), segmenter)

    def advance(self, streams: list[Stream], chunks: list[np.ndarray],
                partials: list[bool] | None = None) -> list[list[Emission] | Exception]:
        """One chunk (16 kHz float32) per stream -> each stream's emissions (finals, then a partial unless
        its `partials` entry is False), or the exception its decoding raised. If the batched step itself
        raises, no stream changed."""
        began = time.perf_counter()
        results = self.recognizer.step_many(chunks, [s.state for s in streams])
        model_s = time.perf_counter() - began
        out: list[list[Emission] | Exception] = []
        for i, (stream, chunk, (logprobs, state)) in enumerate(zip(streams, chunks, results)):
            stream.state, stream.heard = state, stream.heard + len(chunk)
            began = time.perf_counter()
            try:
                partial = True if partials is None else partials[i]
                out.append(stream.segmenter.push(logprobs, stream.seconds, model_s * 1000, partial=partial))
            except Exception as err:
                out.append(err)
            metrics.CHUNK_COMPUTE.observe(model_s + time.perf_counter() - began)
        metrics.AUDIO_SECONDS.inc(sum(len(c) for c in chunks) / SAMPLE_RATE)
        return out

    def due(self, stream: Stream) -> int | None:
        """The stream position (16 kHz samples) at which its open segment's final may be due, if any."""
        return due_sample(self.recognizer, stream.segmenter)

    def finish(self, stream: Stream) -> list[Emission]:
        """End of input: the tail of silence through the model, then the open segment as a final."""
        began = time.perf_counter()
        logprobs, stream.state = self.recognizer.finish(stream.state)
        compute_ms = (time.perf_counter() - began) * 1000
        out = stream.segmenter.push(logprobs, stream.seconds, compute_ms, partial=False)
        return out + stream.segmenter.finish(stream.seconds)
