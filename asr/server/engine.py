"""One model, many streams: an asyncio front for `Recognition` that batches whatever is ready.

Each connection awaits `Engine.step(stream, chunk)` for one 500 ms chunk at a time. A single
worker thread runs the model; while it computes a batch, the chunks that arrive queue up and go
through together in the next pass (at most one chunk per stream per pass, `max_batch` rows).
The event loop stays free for the sockets meanwhile. A failure is reported to the streams whose
chunks failed, never to the others.
"""
from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from asr.endpoint import Emission
from asr.server import protocol
from asr.server.protocol import ProtocolError
from asr.server.recognition import Recognition, Stream

log = logging.getLogger("asr.serve")


@dataclass(eq=False)
class _Job:
    stream: Stream
    chunk: np.ndarray | None  # None: finish the stream
    partial: bool = True  # a partial follows the step (False: an early step, for the finals it closes)
    future: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class Engine:
    """Batches the ready chunks of all live streams through one `Recognition`."""

    def __init__(self, recognition: Recognition, max_batch: int = 64):
        self.recognition, self.max_batch = recognition, max_batch
        self._queue: list[_Job] = []
        self._wake = asyncio.Event()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="asr-engine")
        self._worker: asyncio.Task | None = None
        self.batches = 0  # passes run (for tests and benchmarks)
        self.rows = 0  # chunks stepped
        self.fallbacks = 0  # passes whose batched step failed (then each stream is stepped alone)

    def open(self, hotwords: tuple[str, ...] = ()) -> Stream:
        """A new stream, favouring `hotwords` (lines of a hotword list) if any: ProtocolError (1007) for a
        list that cannot be used. A list first seen builds its lexicon trie here (a few hundred ms)."""
        try:
            return self.recognition.open(list(hotwords))
        except ValueError as err:  # HotwordError, or hotwords asked of a greedy server
            raise ProtocolError(str(err), protocol.INVALID) from None

    async def step(self, stream: Stream, chunk: np.ndarray, partial: bool = True) -> list[Emission]:
        """One chunk of 16 kHz float32 samples -> the stream's emissions for it (a partial last, if `partial`)."""
        return await self._submit(_Job(stream, chunk, partial))

    async def finish(self, stream: Stream) -> list[Emission]:
        """End of the stream's input -> its last emissions."""
        return await self._submit(_Job(stream, None))

    async def _submit(self, job: _Job) -> list[Emission]:
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._run())
        self._queue.append(job)
        self._wake.set()
        return await job.future

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                jobs, taken = [], set()
                for job in self._queue:  # one job per stream per pass, oldest first
                    if id(job.stream) not in taken and len(jobs) < self.max_batch:
                        jobs.append(job)
                        taken.add(id(job.stream))
                self._queue = [job for job in self._queue if job not in jobs]
                try:
                    results = await loop.run_in_executor(self._executor, self._compute, jobs)
                except Exception as err:  # the executor itself failed (shut down): fail these jobs, go on
                    results = [err] * len(jobs)
                for job, result in zip(jobs, results):
                    if job.future.done():  # the client went away
                        continue
                    if isinstance(result, BaseException):
                        job.future.set_exception(result)
                    else:
                        job.future.set_result(result)

    def _compute(self, jobs: list[_Job]) -> list[list[Emission] | BaseException]:
        """Worker thread: the batch of chunks in one pass, then any finishes (each on its own)."""
        out: dict[int, list[Emission] | BaseException] = {}
        steps = [job for job in jobs if job.chunk is not None]
        if steps:
            self.batches += 1
            self.rows += len(steps)
            try:
                results = self.recognition.advance([j.stream for j in steps], [j.chunk for j in steps],
                                                   [j.partial for j in steps])
                out.update((id(j), r) for j, r in zip(steps, results))
            except Exception:  # the batched step failed and changed nothing: find the failing stream(s)
                self.fallbacks += 1
                log.exception("a batched step of %d streams failed; stepping each alone", len(steps))
                for job in steps:
                    out[id(job)] = self._alone(job)
        for job in jobs:
            if job.chunk is None:
                out[id(job)] = self._alone(job)
        return [out[id(job)] for job in jobs]

    def _alone(self, job: _Job) -> list[Emission] | BaseException:
        try:
            if job.chunk is None:
                return self.recognition.finish(job.stream)
            result = self.recognition.advance([job.stream], [job.chunk], [job.partial])[0]
            return result
        except Exception as err:
            return err

    def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)
