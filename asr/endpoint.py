"""Endpointing: split one running recognizer stream into segments (the shared emission loop).

The recognizer state runs on across segments (the encoder is never reset); a segment is just
a range of CTC tokens with a start frame. The rules, with sherpa-onnx's defaults:

  1. nothing decoded in the segment and 2.4 s since it started   -> end (dropped, not emitted)
  2. something decoded and 1.2 s of blank frames since the last token -> end
  3. the segment is 20 s long                                      -> end

Rules are evaluated frame by frame on the token times, so where segments end does not depend
on the chunk size. `emissions` turns chunks of 16 kHz samples into `Emission`s: after every
chunk, one final emission per segment that closed, then one partial for the open segment.
A final segment is never changed again; at end of input the recognizer is flushed with a short
tail of silence (`Recognizer.finish`) and the open segment is closed as final.

With a `BeamSearch` (word LM), partials stay greedy (cheap, every chunk) and each final is the
beam search over the closed segment's frames: the open segment's log-probs are kept until it
closes, at most `max_segment` seconds of them.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import numpy as np
import torch

from asr.audio import SAMPLE_RATE
from asr.decoding.beam import BeamSearch
from asr.decoding.ctc import Token, Word, word_times
from asr.recognizer import Recognizer


@dataclass
class EndpointConfig:
    silence_no_speech: float = 2.4  # seconds of blank with nothing decoded in the segment
    silence_after_speech: float = 1.2  # seconds of blank after the last decoded token
    max_segment: float = 20.0  # seconds


@dataclass
class Emission:
    """One update of the transcript; `to_json` gives the `asr.stream --json` object."""

    segment: int  # segment number, from 0
    start: float  # segment start, seconds from stream start
    time: float  # stream seconds consumed when this was emitted
    text: str  # the segment's whole text so far
    new: str  # text added since the previous emission of this segment
    is_final: bool  # the segment is closed and will not change again
    compute_ms: float  # recognizer.step for the chunk that produced this (+ the beam search, for a final)
    end: float = 0.0  # segment end in seconds (finals only)
    words: list[Word] = field(default_factory=list)  # word times (finals only)

    def to_json(self) -> dict:
        return {"segment": self.segment, "start": round(self.start, 3), "time": round(self.time, 3),
                "text": self.text, "new": self.new, "is_final": self.is_final,
                "compute_ms": round(self.compute_ms, 2)}


def end_frame(tokens: list[Token], start: int, frames: int, cfg: EndpointConfig,
              frame_seconds: float) -> int | None:
    """Frame where the segment starting at frame `start` with `tokens` ends, if an endpoint
    rule fires before frame `frames` (frames decoded so far); else None.

    The segment covers frames [start, end); tokens at or after `end` belong to the next one.
    """
    no_speech = max(1, round(cfg.silence_no_speech / frame_seconds))
    after_speech = max(1, round(cfg.silence_after_speech / frame_seconds))
    longest = start + max(1, round(cfg.max_segment / frame_seconds))
    last: int | None = None
    for token in tokens:
        deadline = min(longest, start + no_speech if last is None else last + 1 + after_speech)
        if token.frame >= deadline:
            return deadline
        last = token.frame
    deadline = min(longest, start + no_speech if last is None else last + 1 + after_speech)
    return deadline if deadline <= frames else None


class Segmenter:
    """Tracks the open segment's tokens and closes segments by the endpoint rules."""

    def __init__(self, recognizer: Recognizer, cfg: EndpointConfig | None = None, beam: BeamSearch | None = None):
        self.recognizer, self.cfg, self.beam = recognizer, cfg or EndpointConfig(), beam
        self.index = 0  # number of the open segment
        self.start = 0  # first frame of the open segment
        self.tokens: list[Token] = []  # greedy tokens of the open segment
        self.logprobs: torch.Tensor | None = None  # (frames since start, V), kept only with a beam
        self.shown = ""  # open segment text at its last emission

    def _text(self, tokens: list[Token]) -> str:
        return self.recognizer.tokenizer.decode([t.id for t in tokens])

    def _emit(self, text: str, now: float, compute_ms: float, final: bool, end: float = 0.0,
              words: list[Word] | None = None) -> Emission:
        new = text[len(self.shown):] if text.startswith(self.shown) else text
        return Emission(self.index, self.start * self.recognizer.frame_seconds, now, text, new,
                        final, compute_ms, end, words or [])

    def _close(self, end: int, now: float, compute_ms: float) -> Emission | None:
        """Close the open segment at frame `end`; returns its final emission (None if empty)."""
        fs = self.recognizer.frame_seconds
        inside = [t for t in self.tokens if t.frame < end]
        final = inside
        if self.beam is not None and inside:
            began = time.perf_counter()
            final = self.beam.tokens(self.logprobs[:end - self.start], offset=self.start)
            compute_ms += (time.perf_counter() - began) * 1000  # a final's compute includes its beam search
        text = self._text(final)
        emission = None
        if text:
            words = word_times(final, self.recognizer.tokenizer, fs)
            emission = self._emit(text, now, compute_ms, True, min(end * fs, now), words)  # not into the tail
            self.index += 1
        self.tokens, self.shown = self.tokens[len(inside):], ""
        if self.logprobs is not None:
            self.logprobs = self.logprobs[end - self.start:]
        self.start = end
        return emission

    def update(self, new_tokens: list[Token], logprobs: torch.Tensor, frames: int, now: float,
               compute_ms: float, partial: bool = True) -> list[Emission]:
        """Add one chunk's tokens and log-probs (T', V) (`frames` decoded so far): finals of closed
        segments, then a partial unless `partial` is False (end of input: the final comes next)."""
        self.tokens.extend(new_tokens)
        if self.beam is not None:
            self.logprobs = logprobs if self.logprobs is None else torch.cat([self.logprobs, logprobs])
        out = []
        while (end := end_frame(self.tokens, self.start, frames, self.cfg, self.recognizer.frame_seconds)) is not None:
            if (emission := self._close(end, now, compute_ms)) is not None:
                out.append(emission)
        if partial:
            text = self._text(self.tokens)
            out.append(self._emit(text, now, compute_ms, False))
            self.shown = text
        return out

    def finish(self, frames: int, now: float) -> Emission | None:
        """End of input: close the open segment as final (None if it holds no text)."""
        return self._close(max(frames, self.start), now, 0.0)


def emissions(recognizer: Recognizer, chunks: Iterable[np.ndarray | torch.Tensor],
              cfg: EndpointConfig | None = None, beam: BeamSearch | None = None) -> Iterator[Emission]:
    """The one emission loop for files and microphones: 16 kHz float32 chunks in, emissions out
    (finals from `beam` over each closed segment, when given).

    Memory stays bounded: tokens of closed segments are dropped, and the recognizer's own
    token list is emptied after every step (the segmenter keeps the open segment's tokens).
    """
    segmenter = Segmenter(recognizer, cfg, beam)
    for step in recognizer.stream(chunks, keep_tokens=False):
        now = step.heard / SAMPLE_RATE
        # the tail's update emits no partial: the final below shows its text
        yield from segmenter.update(step.state.tokens, step.logprobs, step.state.frames, now, step.compute_ms,
                                    partial=not step.tail)
    final = segmenter.finish(step.state.frames, now)
    if final is not None:
        yield final
