"""Whole-file transcriptions beside the live streams: off the event loop, few at a time, giving way.

An uploaded file (POST /v1/audio/transcriptions, `openai_api`) is transcribed exactly as
`asr.transcribe` does it (`Transcriber.transcribe`, the server's own model, decoder and endpointing),
but it must not delay the live WebSocket streams of the same worker, whose chunks are due every 500 ms:

- it runs in a thread of its own (`UPLOAD_THREADS` per worker, one by default), never on the event
  loop, and never in the engine's model thread, so a long file cannot hold up a live pass;
- more uploads wait their turn (at most `MAX_WAITING`; beyond that the request is refused as busy),
  so N uploads cost a worker no more CPU than one;
- before each `CHUNK_MS` chunk of the file, the upload waits while the engine has live chunks queued
  or in a pass (`Engine.busy`), up to `GIVE_WAY_S`: live work goes first, and an upload fills the gaps
  between passes. Under heavy live load an upload slows down (to at least one chunk per GIVE_WAY_S)
  rather than the streams. A chunk once started runs to its end (a 66 s file took 4.1 s, about 60 ms a
  second of audio, on a busy 2-core machine, 2026-11-28), and while it runs the streams' passes can use
  the other cores; they share Python's GIL with it only for its decoding.

The thread's priority is left as it is: a lower OS priority would let it be descheduled while it holds
Python's GIL, stalling the live streams of its own worker behind it (priority inversion).
"""
from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np

from asr.api import Transcriber
from asr.decoding.decoder import Decoder
from asr.decoding.endpoint import Emission
from asr.server.engine import Engine
from asr.text.formats import Transcript

UPLOAD_THREADS = 1  # files transcribed at once per worker
MAX_WAITING = 16  # uploads waiting their turn per worker; more are refused (busy)
CHUNK_MS = 1000.0  # audio per step of an upload: how often it checks whether live work waits
GIVE_WAY_S = 0.1  # the longest one chunk of an upload waits for the engine to go idle
POLL_S = 0.002


class Busy(Exception):
    """Every upload slot is taken and MAX_WAITING uploads already wait."""


class Abandoned(Exception):
    """The client went away: the upload stops at its next chunk."""


class UploadJob(Transcriber):
    """One upload's transcription: reports each partial and final as it comes (`on_emission`), gives way before
    each chunk."""

    def __init__(self, engine: Engine, decoder: Decoder, on_emission: Callable[[Emission], None] | None,
                 gone: Callable[[], bool] | None):
        recognition = engine.recognition
        super().__init__(recognition.recognizer, decoder, recognition.endpoint)
        self.engine, self.on_emission, self.gone = engine, on_emission, gone
        self.abandoned = threading.Event()

    def emissions(self, chunks: Iterable[np.ndarray]) -> Iterator[Emission]:
        for emission in super().emissions(chunks):
            if self.on_emission is not None:
                self.on_emission(emission)
            yield emission

    def give_way(self, _seconds: float) -> None:
        """Called before each chunk (as `transcribe`'s progress): wait while live chunks are queued or
        stepped, up to GIVE_WAY_S; Abandoned once the client has gone."""
        deadline = time.monotonic() + GIVE_WAY_S
        while self.engine.busy and time.monotonic() < deadline:
            time.sleep(POLL_S)
        if self.abandoned.is_set() or (self.gone is not None and self.gone()):
            raise Abandoned("the client went away")

    def run(self, path: Path) -> Transcript:
        return self.transcribe(path, chunk_ms=CHUNK_MS, progress=self.give_way)


class Uploads:
    """The upload threads of one worker and the uploads waiting for them."""

    def __init__(self, engine: Engine, threads: int = UPLOAD_THREADS, max_waiting: int = MAX_WAITING):
        self.engine, self.threads, self.max_waiting = engine, threads, max_waiting
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="asr-upload")
        self._slots: asyncio.Semaphore | None = None  # made in the serving loop
        self.running = self.waiting = 0

    async def transcribe(self, path: Path, decoder: Decoder, on_emission: Callable[[Emission], None] | None = None,
                         gone: Callable[[], bool] | None = None) -> Transcript:
        """The file's Transcript, as `asr.transcribe` gives it; `on_emission` is called (in the upload thread)
        with each partial and final as it comes; `gone` (asked from that thread) says when the client has gone.
        Raises Busy, AudioError, Abandoned, or what decoding raised."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.threads)
        if self.running >= self.threads and self.waiting >= self.max_waiting:
            raise Busy(f"server busy: {self.running} upload(s) running and {self.waiting} waiting")
        job = UploadJob(self.engine, decoder, on_emission, gone)
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, job.run, path)
        except asyncio.CancelledError:  # the handler was cancelled: the thread stops at its next chunk
            job.abandoned.set()
            raise
        finally:
            self.running -= 1
            self._slots.release()

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
