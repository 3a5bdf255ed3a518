"""asr.serve's limits with real clients on a real port: bad messages, vanishing and idle clients,
--max-streams and --token each end one stream with an error event and a close code; the others go on."""
from __future__ import annotations

import asyncio
import json
import time

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from asr.server.app import Limits
from asr.server.recognition import Recognition
from test_serve import (EXAMPLES, ServerThread, decoder, pcm, recognizer, reference, server,  # noqa: F401 (fixtures)
                        transcribe, without_compute)

async def received(ws) -> list[dict]:
    """Every event until the server closes, whatever the close code."""
    events = []
    try:
        async for message in ws:
            events.append(json.loads(message))
    except ConnectionClosed:
        pass
    return events


async def expect_error(url: str, messages: list[str | bytes]) -> tuple[dict, int]:
    """Send `messages`; the error event and the close code that answer them."""
    async with connect(url) as ws:
        for message in messages:
            await ws.send(message)
        events = await received(ws)
    assert events and "error" in events[-1], events
    return events[-1], ws.close_code


@pytest.mark.parametrize("messages, code", [
    ([b"\x00\x01\x02"], 1007),  # odd byte count
    (["hello"], 1003),  # not JSON
    (['{"type": "pause"}'], 1003),  # not the protocol
    (['[1, 2]'], 1003),
    (['{"sample_rate": 123}'], 1007),  # out of range
    (['{"sample_rate": "16000"}'], 1007),
    ([b"\x00\x00" * 100, '{"sample_rate": 8000}'], 1003),  # rate after audio
    ([b"\x00" * (64 * 1024 + 2)], 1009),  # over --max-message
])
def test_bad_messages_get_an_error_event_and_a_close_code(server, messages, code):
    event, closed = asyncio.run(expect_error(server.url, messages))
    assert closed == code == event["code"] and event["error"]


def test_bad_clients_never_disturb_a_good_stream(server, recognizer, decoder):
    path = EXAMPLES / "synthetic_slt.flac"
    expected = without_compute(reference(recognizer, decoder, path))
    data, _ = pcm(path)

    async def vanish() -> None:  # audio, then the TCP connection drops without a close frame
        ws = await connect(server.url)
        await ws.send(data[:20000])
        await asyncio.sleep(0.05)
        ws.transport.abort()

    async def scene() -> list:
        return await asyncio.gather(
            transcribe(server.url, data, pace=0.01), vanish(), vanish(),
            expect_error(server.url, [b"\x01"]), expect_error(server.url, ["nonsense"]),
            expect_error(server.url, [b"\x00" * 70000]), return_exceptions=True)
    good, *others = asyncio.run(scene())
    assert not any(isinstance(r, BaseException) for r in [good, *others]), [good, *others]
    assert good[1] == 1000 and without_compute(good[0]) == expected
    deadline = time.monotonic() + 5
    while server.app.live and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.app.live == 0


def test_idle_streams_time_out(recognizer):
    srv = ServerThread(Recognition(recognizer), Limits(idle_timeout=0.3))
    try:
        event, code = asyncio.run(expect_error(srv.url, [b"\x00\x00" * 800]))
        assert code == 1008 and "idle" in event["error"]
    finally:
        srv.stop()


def test_over_max_streams_is_closed_with_1013(recognizer):
    srv = ServerThread(Recognition(recognizer), Limits(max_streams=2))

    async def scene() -> tuple[dict, int, list]:
        holders = [await connect(srv.url) for _ in range(2)]
        event, code = await expect_error(srv.url, [])
        for ws in holders:
            await ws.send(json.dumps({"type": "end"}))
        ends = [[m async for m in ws] for ws in holders]
        return event, code, [ws.close_code for ws in holders]
    try:
        event, code, held = asyncio.run(scene())
        assert code == 1013 and "busy" in event["error"] and held == [1000, 1000]
    finally:
        srv.stop()


def test_token_is_required_when_set(recognizer):
    srv = ServerThread(Recognition(recognizer), Limits(token="s3cret"))

    async def attempt(url: str, headers: dict | None = None) -> int:
        async with connect(url, additional_headers=headers) as ws:
            await ws.send(json.dumps({"type": "end"}))
            [m async for m in ws]
        return ws.close_code
    try:
        for url, headers in ((srv.url, None), (srv.url + "?token=wrong", None),
                             (srv.url, {"Authorization": "Bearer nope"})):
            with pytest.raises(InvalidStatus) as refused:
                asyncio.run(attempt(url, headers))
            assert refused.value.response.status_code == 401
        assert asyncio.run(attempt(srv.url + "?token=s3cret")) == 1000
        assert asyncio.run(attempt(srv.url, {"Authorization": "Bearer s3cret"})) == 1000
    finally:
        srv.stop()
