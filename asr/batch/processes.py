"""Batched transcription in several processes on one machine: `python -m asr.transcribe --jobs N FILES`, and
`asr.evaluate --jobs N`, which scores the same text (`in_processes` runs any `work` on the groups).

One process steps one padded batch at a time on one core; a machine with more cores runs N of them. The
files are sorted by length, longest first, and cut into groups of GROUP_FILES, which N worker processes take in
turn and transcribe batched (`asr.batch.padded`); the results come back in input order as soon as every earlier file
is done. The workers are forked from the process that loaded the model, sharing its pages, where that is safe
(one-thread onnxruntime sessions, no torch: OpenMP and onnxruntime thread pools do not survive a fork);
otherwise they are spawned and each loads the model itself, as the options describe. Text equals the one-process path:
each file is decoded alone whichever group it lands in. A worker decodes inline, between its encoder steps: with
every core running a worker, a decoding thread beside the encoder only contends for the GIL (measured on 2 cores,
2026-11-29, the 500 dev utterances with the beam search: 9.9-10.1 CPU-seconds against 10.2-10.6, 5.3-5.4 s
against 5.4-5.6 s).
Many machines: `--ray` (asr.batch.cluster).
"""
from __future__ import annotations

import argparse
import functools
import multiprocessing
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol

from asr import cli
from asr.api import Transcriber
from asr.audio import AudioError
from asr.audio.files import audio_duration
from asr.audio.interrupt import ignore_in_worker
from asr.batch.padded import transcribe_batched
from asr.text.formats import Transcript

GROUP_FILES = 32  # files a worker takes at a time: enough to fill its batches, small enough to share the work
_model: Transcriber | None = None  # the worker process's Transcriber
_args: argparse.Namespace | None = None
_failed: str | None = None  # why the worker could not load it


class Work(Protocol):
    """What a worker runs on one group of files: (file, result or AudioError) for each, in order."""

    def __call__(self, model: Transcriber, sources: list[Path], batch_seconds: float, *,
                 seconds: list[float], decode_thread: bool) -> Iterable[tuple[Path, Any]]: ...


class StartError(Exception):
    """A worker could not load the model, decoder or options asked for (the loader's one-line reason)."""


def _start(args: argparse.Namespace) -> None:
    """A worker's start: the model, loaded once (an error is kept for its first group: a pool initializer
    that raises would be restarted forever)."""
    global _model, _args, _failed
    ignore_in_worker()
    try:
        _model, _args = cli.load_transcriber(args), args
    except Exception as err:  # ModelError, LMError, ValueError, OSError: the main process reports it
        _failed = str(err) or type(err).__name__


def _run(work: Work, group: list[tuple[int, Path, float]]) -> list[tuple[int, Any]]:
    if _failed is not None:
        raise StartError(_failed)
    results = work(_model, [path for _, path, _ in group], _args.batch_seconds,
                   seconds=[seconds for _, _, seconds in group], decode_thread=False)
    return [(index, result) for (index, _, _), (_, result) in zip(group, results)]


def _seconds(path: Path) -> float:
    try:
        return audio_duration(path)
    except AudioError:
        return 0.0  # reported when its turn comes


def forks_safely(args: argparse.Namespace) -> bool:
    """Whether workers forked from this process can use the model it loaded: the platform forks, the model runs
    on one onnxruntime thread and nothing loaded torch (whose OpenMP threads a child does not inherit)."""
    return "fork" in multiprocessing.get_all_start_methods() and args.threads == 1 and "torch" not in sys.modules


def transcribe_in_processes(model: Transcriber, args: argparse.Namespace, files: list[Path], jobs: int,
                            progress: Callable[[float], None] | None = None, seconds: list[float] | None = None
                            ) -> Iterator[tuple[Path, Transcript | AudioError]]:
    """(file, its Transcript or AudioError) in input order, from `jobs` worker processes (`in_processes` with
    `asr.batch.padded.transcribe_batched`)."""
    return in_processes(model, args, files, jobs, transcribe_batched, progress, seconds)


def in_processes(model: Transcriber, args: argparse.Namespace, files: list[Path], jobs: int, work: Work,
                 progress: Callable[[float], None] | None = None, seconds: list[float | None] | None = None
                 ) -> Iterator[tuple[Path, Any]]:
    """(file, its result or AudioError) in input order, from `jobs` worker processes (forked with `model`
    where `forks_safely`, else spawned to load their own), each group of files given to `work` (a module-level
    function, so that a spawned worker can find it: `asr.batch.padded.transcribe_batched`'s signature, which it is for
    asr.transcribe and asr.evaluate alike). `progress` is called with each group's
    seconds of audio as it finishes; `seconds`: the files' durations where known (the others are read from
    their headers here). Standard input cannot be shared: ValueError. A spawned worker that cannot load the
    model: StartError, before any result."""
    global _model, _args
    if any(str(path) == "-" for path in files):
        raise ValueError("--jobs reads files, not standard input ('-'): use one job for it")
    known = seconds if seconds is not None else [None] * len(files)
    durations = {i: _seconds(path) if s is None else s for i, (path, s) in enumerate(zip(files, known))}
    order = sorted(durations, key=durations.get, reverse=True)  # the longest first: the last groups even out the end
    groups = [[(i, files[i], durations[i]) for i in order[start:start + GROUP_FILES]]
              for start in range(0, len(order), GROUP_FILES)]
    done: dict[int, Any] = {}
    next_index = 0
    if forks_safely(args):
        _model, _args = model, args
        pool = multiprocessing.get_context("fork").Pool(min(jobs, len(groups)), ignore_in_worker)
    else:
        pool = multiprocessing.get_context("spawn").Pool(min(jobs, len(groups)), _start, (args,))
    with pool:
        for finished in pool.imap_unordered(functools.partial(_run, work), groups):
            done.update(finished)
            if progress is not None:
                progress(sum(durations[index] for index, _ in finished))
            while next_index in done:
                yield files[next_index], done.pop(next_index)
                next_index += 1
