"""Many files, the way the command line asks: side by side in padded batches (`asr.batch.padded`), in --jobs
processes (`asr.batch.processes`), or one at a time through the streaming path (--batch-seconds 0).
`python -m asr.transcribe` and each shard of a Ray job (`asr.batch.cluster`) go through `transcribed`."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable, Iterator

from asr.api import Transcriber
from asr.audio import AudioError
from asr.batch.padded import transcribe_batched
from asr.batch.processes import transcribe_in_processes
from asr.text.formats import Transcript


def transcribed(model: Transcriber, files: list[Path], args: argparse.Namespace,
                progress: Callable[[float], None], seconds: list[float] | None = None
                ) -> Iterator[tuple[Path, Transcript | AudioError]]:
    """(file, its Transcript or AudioError) in input order: batched (`asr.batch.padded.transcribe_batched`), in
    --jobs processes when there are several (`asr.batch.processes`), unless --batch-seconds is 0, then one file at
    a time through the streaming path. `progress`: seconds of audio; `seconds`: the files' durations if known (for
    the length sort)."""
    if args.batch_seconds > 0 and getattr(args, "jobs", 1) > 1:
        yield from transcribe_in_processes(model, args, files, args.jobs, progress, seconds)
        return
    if args.batch_seconds > 0:
        yield from transcribe_batched(model, files, args.batch_seconds, progress, seconds=seconds)
        return
    for path in files:
        try:
            yield path, model.transcribe(path, chunk_ms=args.chunk_ms, progress=progress)
        except AudioError as err:
            yield path, err
