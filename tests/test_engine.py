"""asr.server.engine: how chunks of many streams are gathered into passes (a stand-in recognition,
no model), and that gathering only ever delays a chunk."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest

from asr.server.engine import Engine

pytestmark = pytest.mark.serial  # chunks tens of ms apart, and bounds on how long they wait


class Passes:
    """A stand-in for `Recognition`: records the rows of each pass; a stream's result is its chunk's sum."""

    def __init__(self):
        self.rows: list[int] = []

    def open(self, hotwords: list[str] | None = None, spoken_form: bool = False) -> object:
        return object()

    def advance(self, streams, chunks, partials=None):
        self.rows.append(len(chunks))
        return [[float(c.sum())] for c in chunks]

    def finish(self, stream) -> list:
        return ["end"]


async def _staggered(engine: Engine, streams: int, rounds: int, gap: float) -> list[list[float]]:
    """`streams` streams each stepping `rounds` chunks, one chunk every `streams * gap` s, at phases
    `gap` apart (as clients that started at different moments); every stream's results."""
    async def one(i: int) -> list[float]:
        stream = engine.open()
        await asyncio.sleep(i * gap)
        out = []
        for r in range(rounds):
            out += await engine.step(stream, np.full(4, i + 10 * r, np.float32))
            await asyncio.sleep(streams * gap)
        return out
    return await asyncio.gather(*(one(i) for i in range(streams)))


def test_staggered_chunks_share_passes_when_waiting_is_allowed():
    def run(batch_wait: float) -> tuple[list[list[float]], list[int]]:
        passes = Passes()
        engine = Engine(passes, batch_wait=batch_wait)
        results = asyncio.run(_staggered(engine, streams=8, rounds=12, gap=0.03))
        engine.close()
        if batch_wait == 0:
            assert not engine._arrivals  # nothing is kept (and nothing grows) while waiting is off
        return results, passes.rows
    eager, eager_rows = run(0.0)
    gathered, gathered_rows = run(0.2)
    expected = [[4.0 * (i + 10 * r) for r in range(12)] for i in range(8)]
    assert eager == gathered == expected  # the same results, whatever shares a pass
    assert sum(eager_rows) / len(eager_rows) < 1.5, eager_rows  # chunks 30 ms apart, an instant model: about a row a pass
    late = gathered_rows[len(gathered_rows) // 2:]  # once the arrival rate is known
    assert sum(late) / len(late) >= 3, gathered_rows


def test_a_lone_stream_and_urgent_steps_never_wait():
    async def run() -> tuple[float, float, float]:
        loop = asyncio.get_running_loop()
        engine = Engine(Passes(), batch_wait=5.0)  # a wait would show as seconds
        lone = engine.open()
        began = loop.time()
        for _ in range(5):
            await engine.step(lone, np.ones(4, np.float32))
        lone_s = loop.time() - began
        await _staggered(engine, streams=4, rounds=3, gap=0.0)  # 4 streams at once: a rate of several a second
        other = engine.open()
        began = loop.time()
        await engine.step(other, np.ones(4, np.float32), partial=False)  # an early step for a final
        urgent_s = loop.time() - began
        began = loop.time()
        assert await engine.finish(other) == ["end"]
        finish_s = loop.time() - began
        engine.close()
        return lone_s, urgent_s, finish_s
    lone_s, urgent_s, finish_s = asyncio.run(run())
    assert lone_s < 1.0 and urgent_s < 1.0 and finish_s < 1.0, (lone_s, urgent_s, finish_s)


def test_a_partial_step_waits_for_company_at_most_batch_wait():
    async def run() -> tuple[float, list[int]]:
        loop = asyncio.get_running_loop()
        passes = Passes()
        engine = Engine(passes, batch_wait=0.3)
        await _staggered(engine, streams=6, rounds=2, gap=0.0)  # 12 chunks in the last second
        stream = engine.open()
        began = loop.time()
        await engine.step(stream, np.ones(4, np.float32))  # alone in the queue: waits, then goes alone
        waited = loop.time() - began
        engine.close()
        return waited, passes.rows
    waited, rows = asyncio.run(run())
    assert 0.25 <= waited < 1.0 and rows[-1] == 1, (waited, rows)
