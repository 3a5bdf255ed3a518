"""One model, many streams: an asyncio front for `Recognition` that batches whatever is ready.

Each connection awaits `Engine.step(stream, chunk)` for one 500 ms chunk at a time. A single
worker thread runs the model; while it computes a batch, the chunks that arrive queue up and go
through together in the next pass (at most one chunk per stream per pass, `max_batch` rows).
The event loop stays free for the sockets meanwhile. A failure is reported to the streams whose
chunks failed, never to the others.

Clients' chunks arrive at random phases, so under moderate load most passes would carry a single
row, while the model's cost per row falls as rows share a pass (2026-11-26, shipped model, 500 ms
chunks: about 2x less per row at four rows than at one with ONNX, 3x with torch). With a positive
`batch_wait` (asr.serve --batch-wait; off by default: it saves CPU below the knee at a cost in
latency) a pass waits up to `batch_wait` seconds after its oldest chunk arrived, until the queue holds the chunks
expected in that time at the last second's arrival rate (at most one per stream seen in that
second). A lone stream never waits (it has no company to expect), and steps that bring out a final
or end a stream never wait: they go at once, taking along whatever is queued. Waiting only delays a
chunk: results never depend on how rows are batched.
"""
from __future__ import annotations

import asyncio
import logging
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from asr.decoding.endpoint import Emission
from asr.server import metrics, protocol
from asr.server.protocol import ProtocolError
from asr.server.recognition import Recognition, Stream

log = logging.getLogger("asr.serve")
BATCH_WAIT_MS = 0.0  # asr.serve --batch-wait default. Measured 2026-11-26 (onnx, 2 workers, 2 cores): 50 ms
# took a pass from 1.7 to 3.1 chunks and server CPU from 156% to 143% at 60 clients, but p95 from 83 to 103 ms,
# and at 80 clients (near the knee, where queueing already fills the passes) p95 from 212 to 317 ms: off by default.


@dataclass(eq=False)
class _Job:
    stream: Stream
    chunk: np.ndarray | None  # None: finish the stream
    partial: bool = True  # a partial follows the step (False: an early step, for the finals it closes)
    future: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    arrived: float = field(default_factory=lambda: asyncio.get_running_loop().time())

    @property
    def urgent(self) -> bool:
        """A step that brings out a final, or the end of a stream: its pass never waits."""
        return self.chunk is None or not self.partial


class Engine:
    """Batches the ready chunks of all live streams through one `Recognition`."""

    def __init__(self, recognition: Recognition, max_batch: int = 64, batch_wait: float = BATCH_WAIT_MS / 1000):
        self.recognition, self.max_batch, self.batch_wait = recognition, max_batch, batch_wait
        self._queue: list[_Job] = []
        self._arrivals: deque[tuple[float, int]] = deque()  # (when, stream id) of the last second's jobs
        self._wake = asyncio.Event()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="asr-engine")
        self._worker: asyncio.Task | None = None
        self.batches = 0  # passes run (for tests and benchmarks)
        self.rows = 0  # chunks stepped
        self.fallbacks = 0  # passes whose batched step failed (then each stream is stepped alone)
        self._computing = False  # a pass is in the model's thread now

    @property
    def busy(self) -> bool:
        """Whether live chunks are queued or in a pass now (read from any thread: uploads give way to them)."""
        return self._computing or bool(self._queue)

    def open(self, hotwords: tuple[str, ...] = (), spoken_form: bool = False) -> Stream:
        """A new stream, favouring `hotwords` (lines of a hotword list) if any, its finals in the spoken form if
        asked: ProtocolError (1007) for a list that cannot be used. A list first seen builds its lexicon trie
        here (a few hundred ms)."""
        try:
            return self.recognition.open(list(hotwords), spoken_form)
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
        if self.batch_wait > 0:  # only `_gather` reads (and prunes) the arrivals
            self._arrivals.append((job.arrived, id(job.stream)))
        self._wake.set()
        return await job.future

    def _expected(self, now: float) -> int:
        """Streams expected to have a job within `batch_wait`: the last second's arrival rate times
        `batch_wait`, at most the streams seen in that second (and `max_batch`)."""
        while self._arrivals and self._arrivals[0][0] < now - 1.0:
            self._arrivals.popleft()
        streams = len({stream for _, stream in self._arrivals})
        return min(self.max_batch, streams, int(len(self._arrivals) * self.batch_wait))

    async def _gather(self) -> None:
        """Wait until the queue holds the jobs expected within `batch_wait` of its oldest, that time
        has passed, or an urgent job is queued."""
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            expected = self._expected(now)
            left = self._queue[0].arrived + self.batch_wait - now
            queued = len({id(j.stream) for j in self._queue})
            if expected < 2 or queued >= expected or left <= 0 or any(j.urgent for j in self._queue):
                return
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), left)
            except asyncio.TimeoutError:
                return

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                if self.batch_wait > 0:
                    await self._gather()
                jobs, taken = [], set()
                for job in self._queue:  # one job per stream per pass, oldest first
                    if id(job.stream) not in taken and len(jobs) < self.max_batch:
                        jobs.append(job)
                        taken.add(id(job.stream))
                self._queue = [job for job in self._queue if job not in jobs]
                self._computing = True
                try:
                    results = await loop.run_in_executor(self._executor, self._compute, jobs)
                except Exception as err:  # the executor itself failed (shut down): fail these jobs, go on
                    results = [err] * len(jobs)
                finally:
                    self._computing = False
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
            metrics.BATCH_ROWS.observe(len(steps))
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
