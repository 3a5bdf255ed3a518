"""Batched whole-file transcription: many files' encoder steps in one padded batch, the same decoding per file.

    from asr.batch.padded import transcribe_batched
    for source, result in transcribe_batched(model, ["a.wav", "b.m4a"], batch_seconds=32):
        print(source, result.text if not isinstance(result, Exception) else f"failed: {result}")

The per-file path (`Transcriber.transcribe`) steps one file at a time, chunk by chunk. Here the files are
sorted by length and stepped side by side: each open file gives its next window of `window_seconds` (4 s) to
one backend call over padded rows (`Recognizer.step_many`, at most `batch_seconds` of audio a call), its
streaming state carried from window to window, so memory stays bounded however long a file is; a file's last
window takes the tail of silence with it (`final`: what `Recognizer.finish` steps), so it costs no call of its
own. When a file ends, its row goes to the next file. Each window's log-probs go into that file's own
`Segmenter` (`asr.decoding.endpoint`), exactly as the streaming path feeds it, on one decoding thread beside the
encoder: the same endpoints, the same search (greedy, or beam + word LM with hotwords) and the same restored
finals, so the text equals the per-file text file by file. The windowed-causal encoder gives the same log-probs
whatever the steps (tests/test_batch.py checks the text).
A file that cannot be read is given back as its AudioError; the others go on.
"""
from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol, Sequence

import numpy as np

from asr.audio import SAMPLE_RATE, AudioError
from asr.audio.chunks import rechunk
from asr.audio.files import audio_duration, read_blocks
from asr.audio.resample import resample
from asr.decoding.endpoint import Segmenter, ms
from asr.model.recognizer import Recognizer, StreamState
from asr.text.formats import Segment, Transcript

if TYPE_CHECKING:
    from asr.api import Transcriber

Source = str | Path | np.ndarray  # a file (or "-", standard input) or 16 kHz samples (N,)
WINDOW_SECONDS = 4.0  # audio per row and step (measured: 4 s beat 2, 3, 5, 6 and 8 s; docs/usage.md)
DEFAULT_BATCH_SECONDS = 16.0  # audio per backend call (4 rows of 4 s): as fast as 24 and 32 (docs/usage.md)


class Sink(Protocol):
    """What one file's log-probs go into, window by window (run on the decoding thread)."""

    def push(self, logprobs: np.ndarray, now: float) -> None:
        """The next frames' log-probs (T', V); `now`: seconds of the file stepped so far."""

    def finish(self, now: float) -> Any:
        """End of the file (`now`: its duration in seconds) -> its result."""


class TranscriptSink:
    """A file's finals through its own `Segmenter`, as `Transcriber.transcribe` makes them -> a Transcript."""

    def __init__(self, transcriber: "Transcriber", name: str):
        recognizer = transcriber.recognizer
        self.name, self.began = name, time.perf_counter()
        self.segmenter = Segmenter(transcriber.decoder, recognizer.frame_seconds, transcriber.endpoint,
                                   recognizer.lookahead_frames)
        self.finals: list = []

    def push(self, logprobs: np.ndarray, now: float) -> None:
        self.finals += [e for e in self.segmenter.push(logprobs, now, partial=False) if e.is_final]

    def finish(self, now: float) -> Transcript:
        self.finals += self.segmenter.finish(now)
        segments = [Segment(e.start, e.end, e.text, e.words, e.plain or "") for e in self.finals]
        rtf = (time.perf_counter() - self.began) / now if now else 0.0
        return Transcript(self.name, " ".join(s.text for s in segments), ms(now), segments, rtf)


class LogprobSink:
    """A file's log-probs, gathered -> ((T, V), seconds of audio): what `Recognizer.offline_logprobs` gives, to
    float rounding."""

    def __init__(self, vocab: int):
        self.parts: list[np.ndarray] = [np.zeros((0, vocab), np.float32)]

    def push(self, logprobs: np.ndarray, now: float) -> None:
        self.parts.append(logprobs)

    def finish(self, now: float) -> tuple[np.ndarray, float]:
        return np.concatenate(self.parts), now


@dataclass
class _Row:
    """One open file: its windows still to step, its streaming state, where its log-probs go."""

    index: int
    windows: Iterator[tuple[np.ndarray, bool]]  # (window, is it the file's last)
    state: StreamState
    sink: Sink
    heard: int = 0  # samples stepped so far
    piece: np.ndarray | None = field(default=None, repr=False)  # this step's window (None: the file has ended)
    last: bool = False  # the piece is the file's last window: the tail of silence goes with it


def duration_of(source: Source) -> float:
    """Seconds of a source for sorting: the file header's (0 for stdin or an unreadable file, which fails
    when it is read) or the array's."""
    if isinstance(source, np.ndarray):
        return source.size / SAMPLE_RATE
    try:
        return 0.0 if str(source) == "-" else audio_duration(source)
    except AudioError:
        return 0.0


def _windows(source: Source, size: int) -> Iterator[tuple[np.ndarray, bool]]:
    """A source's 16 kHz samples in windows of `size` (the last shorter), each with whether it is the last (read
    one window ahead); AudioError while reading a bad file."""
    if isinstance(source, np.ndarray):
        windows = rechunk([resample(np.asarray(source, np.float32).reshape(-1), SAMPLE_RATE)], size)
    else:
        windows = rechunk(read_blocks(source), size)
    previous = next(windows, None)
    for window in windows:
        yield previous, False
        previous = window
    if previous is not None:
        yield previous, True


def sub_batches(lengths: list[int]) -> list[list[int]]:
    """Positions of one step's pieces (their sample counts) grouped into backend calls, longest first, so that
    no piece in a call is shorter than half its longest: a 0.5 s end of a file does not ride padded to 4 s."""
    groups: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        if groups and 2 * lengths[i] >= lengths[groups[-1][0]]:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def run_batched(recognizer: Recognizer, sources: Sequence[Source], make_sink: Callable[[int], Sink],
                batch_seconds: float = DEFAULT_BATCH_SECONDS, window_seconds: float = WINDOW_SECONDS,
                progress: Callable[[float], None] | None = None,
                decode_thread: bool = True, seconds: Sequence[float | None] | None = None) -> Iterator[tuple[int, Any]]:
    """Every source stepped in length-sorted padded batches; yields (index into `sources`, the sink's result or
    the AudioError that stopped it) as each file completes. `make_sink(index)`: where that file's log-probs
    go. `progress`: called with the seconds of audio of each step's windows. `decode_thread`: the sinks run
    on one thread beside the encoder (False: inline, where every core already runs a process of its own).
    `seconds`: the sources' durations for the length sort where the caller knows them (a manifest's); the
    others' are read from their headers here."""
    if not batch_seconds > 0 or not window_seconds > 0:
        raise ValueError(f"batch and window seconds must be > 0 (got {batch_seconds}, {window_seconds})")
    recognizer.check_chunk_ms(window_seconds * 1000)  # a lookahead model's chunk fits in a window
    window = max(1, round(window_seconds * SAMPLE_RATE))
    rows_max = max(1, int(batch_seconds // window_seconds))
    known = [None] * len(sources) if seconds is None else seconds
    seconds = [duration_of(source) if s is None else s for source, s in zip(sources, known)]
    waiting = sorted(range(len(sources)), key=seconds.__getitem__, reverse=True)  # pop() = shortest
    pool = ThreadPoolExecutor(1, thread_name_prefix="asr-decode") if decode_thread else None
    pending: list[tuple[int, Future]] = []
    rows: list[_Row] = []

    def run(call: Callable[..., Any], *args: Any) -> Future:
        if pool is not None:
            return pool.submit(call, *args)
        future: Future = Future()
        try:
            future.set_result(call(*args))
        except Exception as err:  # delivered where the pool's future would deliver it
            future.set_exception(err)
        return future

    try:
        while waiting or rows:
            while waiting and len(rows) < rows_max:
                index = waiting.pop()
                rows.append(_Row(index, _windows(sources[index], window), recognizer.initial_state(),
                                 make_sink(index)))
            failed = []
            for row in rows:
                try:
                    row.piece, row.last = next(row.windows, (None, True))
                except AudioError as err:
                    failed.append(row)
                    pending.append((row.index, run(_raise, err)))
            rows = [r for r in rows if r not in failed]
            for row in rows:  # a file without a sample ends here
                if row.piece is None:
                    pending.append((row.index, run(row.sink.finish, row.heard / SAMPLE_RATE)))
            rows = [r for r in rows if r.piece is not None]
            _step(recognizer, rows, run)
            for row in rows:
                if row.last:
                    pending.append((row.index, run(row.sink.finish, row.heard / SAMPLE_RATE)))
            if progress:
                progress(sum(r.piece.size for r in rows) / SAMPLE_RATE)
            rows = [r for r in rows if not r.last]
            while pending and (pending[0][1].done() or not (waiting or rows)):
                index, future = pending.pop(0)
                yield index, _outcome(future)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _step(recognizer: Recognizer, rows: list[_Row], run: Callable[..., Future]) -> None:
    """One step of every row: its window through the model, a file's last window with the tail of silence
    after it and `final` (what `Recognizer.finish` steps, unless the file is too short for a frame), in as few
    padded backend calls as `sub_batches` allows, final and other rows apart; each row's log-probs handed to
    its sink (`run`)."""
    enough = recognizer.samples_for_frames(1)
    final = [r.last and r.state.samples + r.piece.size >= enough for r in rows]
    pieces = [np.concatenate([r.piece, recognizer.tail]) if f else r.piece for r, f in zip(rows, final)]
    for ending in (False, True):
        these = [i for i in range(len(rows)) if final[i] == ending]
        for part in ([these[j] for j in group] for group in sub_batches([pieces[i].size for i in these])):
            stepped = recognizer.step_many([pieces[i] for i in part], [rows[i].state for i in part], ending)
            for i, (logprobs, state) in zip(part, stepped):
                row = rows[i]
                row.state, row.heard = state, row.heard + row.piece.size
                run(row.sink.push, logprobs, row.heard / SAMPLE_RATE)


def _raise(err: Exception) -> Any:
    raise err


def _outcome(future: Future) -> Any:
    """A finished sink's result, or the AudioError it ended with."""
    try:
        return future.result()
    except AudioError as err:
        return err


def in_order(results: Iterator[tuple[int, Any]], sources: Sequence[Source]) -> Iterator[tuple[Source, Any]]:
    """(index, result) in any order -> (source, result) in the order of `sources`, each as soon as all before it are."""
    done: dict[int, Any] = {}
    upto = 0
    for index, result in results:
        done[index] = result
        while upto in done:
            yield sources[upto], done.pop(upto)
            upto += 1


def transcribe_batched(transcriber: "Transcriber", sources: Sequence[Source],
                       batch_seconds: float = DEFAULT_BATCH_SECONDS,
                       progress: Callable[[float], None] | None = None,
                       window_seconds: float = WINDOW_SECONDS, seconds: Sequence[float | None] | None = None,
                       decode_thread: bool = True) -> Iterator[tuple[Source, Transcript | AudioError]]:
    """Files (paths, "-") or 16 kHz arrays (N,) -> (source, its Transcript or AudioError), in the order of
    `sources`; the text equals `transcriber.transcribe(source)`'s (an array's with sample_rate=16000).
    `batch_seconds`: audio per encoder call (memory and speed); `progress`: called with seconds of audio as they are stepped; `seconds`: the sources'
    durations if known; `decode_thread`: decode beside the encoder (see `run_batched`)."""
    def sink(index: int) -> Sink:
        source = sources[index]
        return TranscriptSink(transcriber, "<array>" if isinstance(source, np.ndarray) else str(source))

    return in_order(run_batched(transcriber.recognizer, sources, sink, batch_seconds, window_seconds, progress,
                                decode_thread, seconds), sources)


def logprobs_batched(recognizer: Recognizer, sources: Sequence[Source], batch_seconds: float = DEFAULT_BATCH_SECONDS,
                     progress: Callable[[float], None] | None = None,
                     window_seconds: float = WINDOW_SECONDS, seconds: Sequence[float | None] | None = None
                     ) -> Iterator[tuple[Source, tuple[np.ndarray, float] | AudioError]]:
    """Files or 16 kHz arrays -> (source, (its whole log-probs (T, V), tail included; its seconds) or
    AudioError), in the order of `sources`; `seconds`: their durations if known (see `run_batched`)."""
    vocab = recognizer.model.cfg.vocab_size
    return in_order(run_batched(recognizer, sources, lambda _: LogprobSink(vocab), batch_seconds, window_seconds,
                                progress, seconds=seconds), sources)
