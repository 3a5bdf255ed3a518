"""Endpointing: one running stream of log-probs -> segments with partial and final results.

The recognizer runs on across segments (the encoder is never reset); a segment is a range of
encoder frames. Where segments end is decided frame by frame by the rules of
`asr.decoding.endpoint_rules` (a pause ends a segment sooner where the word LM says the sentence
can end there), so it does not depend on the chunk size.

Every frame goes once into the open segment's search (`asr.decoding.Decoder`: greedy, or the
beam search with the word LM): after each chunk a partial shows its best hypothesis where that
changed what the reader has (no segment opens with an empty partial, and no partial repeats the
one before unchanged), and the final is the same search finished at the segment's end, so partials
and finals agree unless the LMs' scores of the whole list change their minds. The word LMs score a final
after the last words of the finals before it (`EndpointConfig.words_before`), and weigh its sentence's end by how
likely its closing pause is inside a sentence (`EndpointConfig.mid_sentence`; at the stream's end the sentence ends):
`asr.decoding.rescore.Place`. A final segment is never
changed again. With a restorer, a final is cased and punctuated after the last words of the finals before it,
and whether it ends a sentence is decided at its endpoint from the silence after its last word
(`asr.text.restore.context`). Times (a segment's start and end, the stream's time, word times) are in seconds,
rounded to the millisecond.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field, replace
from typing import Iterable, Iterator

import numpy as np

from asr.audio import SAMPLE_RATE
from asr.audio.chunks import Chunker
from asr.decoding.ctc import Token, Word, greedy_tokens, word_json
from asr.decoding.decoder import Decoder
from asr.decoding.endpoint_rules import EndpointConfig, deadline, end_frame
from asr.decoding.stepping import Stepper
from asr.model.recognizer import Recognizer
from asr.text.restore.context import SENTENCE_PAUSE, Context
from asr.text.tokenizer import BLANK


@dataclass
class Emission:
    """One update of the transcript; `to_json` gives the `asr.stream --json` object."""

    segment: int  # segment number, from 0
    start: float  # segment start, seconds from stream start
    time: float  # stream seconds consumed when this was emitted
    text: str  # the segment's whole text so far
    keep: int  # characters of this segment's previous emission's text that stay (0 at its first emission)
    new: str  # what follows them: text == previous text[:keep] + new
    is_final: bool  # the segment is closed and will not change again
    compute_ms: float  # the recognizer step for the chunk that produced this, plus its decoding
    end: float = 0.0  # segment end in seconds (finals only)
    words: list[Word] = field(default_factory=list)  # word times (finals only)
    plain: str | None = None  # a restored final's plain words (then `text` is cased and punctuated)

    def to_json(self) -> dict:
        """The event's JSON object; a final also carries its words (plain, with times and confidences) and,
        when restored, its plain text."""
        out = {"segment": self.segment, "start": round(self.start, 3), "time": round(self.time, 3),
               "text": self.text, "keep": self.keep, "new": self.new, "is_final": self.is_final,
               "compute_ms": round(self.compute_ms, 2)}
        if self.is_final:
            out["words"] = [word_json(w) for w in self.words]
        return out if self.plain is None else {**out, "plain": self.plain}


def ms(seconds: float) -> float:
    """Seconds rounded to the millisecond, as every time in an emission is (2.8, not 2.8000000000000003)."""
    return round(seconds, 3)


class Segmenter:
    """One stream's segments: feed each chunk's log-probs with `push`, close with `finish`."""

    def __init__(self, decoder: Decoder, frame_seconds: float, cfg: EndpointConfig | None = None,
                 lookahead: int = 0):
        """`lookahead`: the model's lookahead chunk in encoder frames (`Recognizer.lookahead_frames`; 0: none)."""
        self.decoder, self.frame_seconds, self.lookahead = decoder, frame_seconds, lookahead
        self.cfg = (cfg or EndpointConfig()).validate()
        self.index = 0  # number of the open segment
        self.start = 0  # first frame of the open segment
        self.frames = 0  # frames pushed so far
        self.previous = BLANK  # greedy symbol of the last frame
        self.tokens: list[Token] = []  # greedy tokens of the open segment (for the endpoint rules)
        self.search = decoder.search(0)
        self.fed = 0  # frames fed into the searches so far
        self.chunk = (np.zeros((0, 0), np.float32), 0)  # the log-probs being pushed, and the frame they start at
        judged = self.cfg.trailing_silence is None and decoder.kind == "beam"  # a word LM judges the pauses
        self.ask = self._ask if judged else None
        self.verdicts: dict[int, float] = {}  # the open segment's pauses (their last token's frame) -> the word
        # LM's log10 P(</s>) where each may first end it
        self.heard: list[np.ndarray] = []  # the open segment's log-probs (for its words' confidences)
        self.said: list[str] = []  # the last words of the finals so far (the word LMs read the next one after them)
        self.shown = ""  # open segment text at its last emission
        self.context = Context()  # the finals so far, as the restorer reads the next one after them

    def _emit(self, text: str, now: float, compute_ms: float, final: bool, end: float = 0.0,
              words: list[Word] | None = None) -> Emission:
        keep = len(os.path.commonprefix([self.shown, text]))  # a revision of earlier words keeps less
        return Emission(self.index, ms(self.start * self.frame_seconds), ms(now), text, keep, text[keep:], final,
                        compute_ms, ms(end), [replace(w, start=ms(w.start), end=ms(w.end)) for w in words or []])

    def _close(self, end: int, now: float, compute_ms: float, last: bool = False) -> Emission | None:
        """Close the open segment at frame `end` (all its frames pushed); its final emission, if any text
        (`last`: the stream's last, which ends a sentence)."""
        heard = np.concatenate(self.heard) if self.heard else None
        tokens, words = self.decoder.finish(self.search, self.frame_seconds, heard, self.start, self.said,
                                            0.0 if last else self.cfg.mid_sentence)
        text = self.decoder.text(tokens)
        self.said = (self.said + text.split())[-self.cfg.words_before:] if self.cfg.words_before else []
        emission = None
        if text:
            after = math.inf if last else end * self.frame_seconds - (words[-1].end if words else 0.0)
            if self._ends_sentence(end):  # as the word LM judged it: a sentence end, as after a long pause
                after = max(after, SENTENCE_PAUSE)
            restored = self.decoder.restore(text, words, self.context, after)  # cased and punctuated (None: plain)
            emission = self._emit(restored or text, now, compute_ms, True, min(end * self.frame_seconds, now), words)
            emission.plain = None if restored is None else text
            self.index += 1
        self.tokens = [t for t in self.tokens if t.frame >= end]
        self.start, self.verdicts = end, {}
        self.shown = "" if emission else self.shown  # no final: the reader still has the last partial of this segment
        self.search, self.heard = self.decoder.search(end, self.said), []
        return emission

    def _ends_sentence(self, end: int) -> bool:
        """Whether the segment closing at frame `end` ended where the word LM let its sentence end (rule 2)."""
        last = max((t.frame for t in self.tokens if t.frame < end), default=None)
        verdict = self.verdicts.get(last) if last is not None else None
        return verdict is not None and verdict >= self.cfg.sentence_end_logprob

    def _feed(self, upto: int) -> None:
        """The frames pushed up to frame `upto` (absolute) into the open segment's search."""
        logprobs, first = self.chunk
        piece = logprobs[self.fed - first:max(upto, self.fed) - first]
        self.search.push(piece)
        self.heard.append(piece)
        self.fed += piece.shape[0]

    def _ask(self, last: int, end: int) -> float:
        """The silence that ends the pause after the token at frame `last`, judged by the word LM on the search's
        best hypothesis at frame `end`, where the pause may first end the segment (asked once a pause)."""
        if last not in self.verdicts:
            self._feed(end)
            self.verdicts[last] = self.search.sentence_end()
        return self.cfg.silence_for(self.verdicts[last])

    def push(self, logprobs: np.ndarray, now: float, compute_ms: float = 0.0, partial: bool = True) -> list[Emission]:
        """One chunk's log-probs (T', V), `now` seconds of the stream heard: the finals of segments
        that closed in it, then a partial for the open one (unless `partial` is False)."""
        began = time.perf_counter()
        new, self.previous = greedy_tokens(logprobs, self.previous, self.frames)
        self.tokens.extend(new)
        total, closed = self.frames + logprobs.shape[0], []
        self.chunk = (logprobs, self.frames)
        while (end := end_frame(self.tokens, self.start, total, self.cfg, self.frame_seconds, self.ask,
                                self.lookahead)) is not None:
            self._feed(end)
            closed.append(self._close(end, now, 0.0))
        self._feed(total)
        self.frames = total
        out = [e for e in closed if e is not None]
        if partial and (text := self.decoder.text(self.search.best())) != self.shown:  # only what changed
            out.append(self._emit(text, now, 0.0, False))
            self.shown = text
        spent = compute_ms + (time.perf_counter() - began) * 1000
        for emission in out:
            emission.compute_ms = spent
        return out

    def due(self) -> int | None:
        """The frame count at which the open segment's final comes out unless another token comes first;
        None while nothing is decoded in it (a segment of silence ends without a final)."""
        if not self.tokens:
            return None
        last = self.tokens[-1].frame
        judged = last in self.verdicts
        silence = self.cfg.silence_for(self.verdicts[last]) if judged else self.cfg.first_silence(self.ask is not None)
        return deadline(last, self.start, self.cfg, self.frame_seconds, silence)

    def finish(self, now: float) -> list[Emission]:
        """End of input: close the open segment as final (nothing if it holds no text)."""
        began = time.perf_counter()
        emission = self._close(max(self.frames, self.start), now, 0.0, last=True)
        if emission is None:
            return []
        emission.compute_ms = (time.perf_counter() - began) * 1000
        return [emission]


class Stream:
    """One live stream, pushed as its audio arrives: `push` each piece of 16 kHz float32 samples, then
    `finish` once; each returns the emissions that became due (a partial after a chunk that changed the text,
    each final as soon as the audio holds its endpoint: `asr.decoding.stepping`; `early=False`: only at the end
    of a chunk, which changes nothing but the finals' `time` and `compute_ms`). Pieces are chunk boundaries as they come,
    or, with `chunk_samples`, are cut into chunks of exactly that many samples first (any piece lengths
    then give the same emissions). Memory stays bounded: a closed segment's state is dropped."""

    def __init__(self, recognizer: Recognizer, decoder: Decoder | None = None, cfg: EndpointConfig | None = None,
                 early: bool = True, chunk_samples: int | None = None):
        self.recognizer = recognizer
        self.segmenter = Segmenter(decoder or Decoder(recognizer.tokenizer), recognizer.frame_seconds, cfg,
                                   recognizer.lookahead_frames)
        self.early = early
        self.chunker = Chunker(chunk_samples) if chunk_samples else None
        self.stepper: Stepper | None = None  # made at the first chunk, whose size is the nominal one
        self.state = recognizer.initial_state()
        self.finished = False

    def push(self, samples: np.ndarray) -> list[Emission]:
        """More audio (N,) -> the emissions it completes."""
        if self.finished:
            raise ValueError("this stream is finished: start a new one")
        samples = np.asarray(samples, dtype=np.float32).reshape(-1)
        chunks = self.chunker.push(samples) if self.chunker else [samples]
        return [e for chunk in chunks for e in self._chunk(chunk)]

    def _chunk(self, chunk: np.ndarray) -> list[Emission]:
        self.stepper = self.stepper or Stepper(max(1, len(chunk)), marked=True)
        self.stepper.push(chunk, boundary=True)
        out: list[Emission] = []
        while (step := self.stepper.next(self._due())) is not None:
            piece, partial = step
            began = time.perf_counter()
            logprobs, self.state = self.recognizer.step(piece, self.state)
            compute_ms = (time.perf_counter() - began) * 1000
            out += self.segmenter.push(logprobs, self.stepper.stepped / SAMPLE_RATE, compute_ms, partial=partial)
        return out

    def _due(self) -> int | None:
        return due_sample(self.recognizer, self.segmenter) if self.early else None

    def finish(self) -> list[Emission]:
        """End of input: the last chunk's emissions, then the tail's (no partial) and the open segment's final."""
        out = [e for chunk in (self.chunker.flush() if self.chunker else []) for e in self._chunk(chunk)]
        self.finished = True
        now = self.stepper.stepped / SAMPLE_RATE if self.stepper else 0.0
        began = time.perf_counter()
        logprobs, self.state = self.recognizer.finish(self.state)  # the tail: no partial, the final shows it
        out += self.segmenter.push(logprobs, now, (time.perf_counter() - began) * 1000, partial=False)
        return out + self.segmenter.finish(now)


def emissions(recognizer: Recognizer, chunks: Iterable[np.ndarray], decoder: Decoder | None = None,
              cfg: EndpointConfig | None = None, early: bool = True) -> Iterator[Emission]:
    """The one emission loop for files and microphones: 16 kHz float32 chunks in (each a chunk boundary),
    emissions out, greedy unless a `decoder` is given (`Stream`, fed from an iterable)."""
    stream = Stream(recognizer, decoder, cfg, early)
    for chunk in chunks:
        yield from stream.push(chunk)
    yield from stream.finish()


def due_sample(recognizer: Recognizer, segmenter: Segmenter) -> int | None:
    """The stream position (samples) at which the open segment's final may be due (`Segmenter.due`)."""
    frame = segmenter.due()
    return None if frame is None else recognizer.samples_for_frames(frame, final=False)
