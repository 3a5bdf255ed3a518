"""A client that goes away mid-request is a normal event, not a server error: a dropped upload (POST
/v1/audio/transcriptions, streamed or not, during its body or its answer) is one 499 and one log line, a vanished
WebSocket or Wyoming stream one `disconnected` count; never a 5xx, never a traceback."""
from __future__ import annotations

import asyncio
import logging
import re
import socket
import time
from pathlib import Path
from urllib.request import urlopen

import numpy as np
import pytest
import soundfile as sf
from websockets.asyncio.client import connect
from wyoming.audio import AudioChunk, AudioStart
from wyoming.client import AsyncTcpClient

from asr.audio import SAMPLE_RATE
from asr.server import openai_api, wyoming
from asr.server.app import Limits
from asr.server.recognition import Recognition
from test_serve import EXAMPLES, ServerThread, decoder, pcm, recognizer  # noqa: F401 (fixtures)

WAIT_S = 60.0  # for the server to notice a drop on a loaded machine


@pytest.fixture(scope="module")
def server(recognizer, decoder):
    srv = ServerThread(Recognition(recognizer, decoder), Limits())
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 40 s of speech with pauses (many finals): long enough that no request ends before its client drops."""
    a, b = (sf.read(EXAMPLES / name, dtype="float32")[0]
            for name in ("synthetic_slt.flac", "speechocean762_0813_0233.flac"))
    gap = np.zeros(SAMPLE_RATE, np.float32)
    path = tmp_path_factory.mktemp("drops") / "speech.wav"
    sf.write(path, np.concatenate([a, gap, b, gap] * 4), SAMPLE_RATE, subtype="PCM_16")
    return path


def samples(port: int) -> dict[str, float]:
    """Every labelled sample of asr_uploads_total and asr_errors_total in /metrics: 'uploads/499' -> its value."""
    text = urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    found = re.findall(r'^asr_(uploads|errors)_total\{(?:status|kind)="([^"]+)"\} (\S+)$', text, flags=re.M)
    return {f"{name}/{label}": float(value) for name, label, value in found}


def changes(port: int, before: dict[str, float], until: str) -> dict[str, float]:
    """The samples that moved since `before`, once `until` has (or after WAIT_S)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        now = samples(port)
        moved = {key: value - before.get(key, 0.0) for key, value in now.items() if value != before.get(key, 0.0)}
        if until in moved or time.monotonic() > deadline:
            return moved


def request(port: int, audio: Path, stream: bool) -> tuple[bytes, bytes]:
    """A POST /v1/audio/transcriptions of `audio` as raw bytes: the head, and the multipart body."""
    fields = [("model", "whisper-1")] + ([("stream", "true")] if stream else [])
    body = b"".join(f'--b\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode() for k, v in fields)
    body += (b'--b\r\nContent-Disposition: form-data; name="file"; filename="speech.wav"\r\n'
             b"Content-Type: audio/wav\r\n\r\n" + audio.read_bytes() + b"\r\n--b--\r\n")
    head = (f"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    return head, body


def drop_upload(port: int, audio: Path, when: str) -> None:
    """Send an upload and go away: in the middle of its body, right after it, or after the first streamed event."""
    head, body = request(port, audio, stream=when == "after the first event")
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as sock:
        if when == "in the body":
            sock.sendall(head + body[: len(body) // 2])
            time.sleep(0.2)
            return
        sock.sendall(head + body)
        if when == "after the first event":
            got = b""
            while b"data: " not in got:
                got += sock.recv(1 << 16)


@pytest.mark.parametrize("when, noticed", [("after the first event", True), ("after the first event", False),
                                           ("in the body", True), ("while it is transcribed", True)])
def test_a_dropped_upload_is_one_499_and_one_log_line(server, speech, when, noticed, caplog, monkeypatch):
    """`noticed=False`: the transcription does not see the client go (it finds out between two chunks of audio), so
    the next event's write is what fails (it was logged twice with a traceback and counted as two 500s)."""
    caplog.set_level(logging.INFO, logger="asr.serve")
    if not noticed:
        monkeypatch.setattr(openai_api, "_gone", lambda request: False)
    before = samples(server.port)
    drop_upload(server.port, speech, when)
    moved = changes(server.port, before, "uploads/499")
    assert moved == {"uploads/499": 1.0}, moved  # no 5xx (nor any other count)
    assert [r.getMessage() for r in caplog.records if r.name == "asr.serve"] == ["upload dropped: the client went away"]
    assert not any(r.exc_info for r in caplog.records), "a traceback was logged"


def test_a_vanished_websocket_stream_is_counted_as_disconnected(server, speech, caplog):
    data, _ = pcm(speech)

    async def vanish() -> None:
        async with connect(f"ws://127.0.0.1:{server.port}/asr", max_size=None) as ws:
            for start in range(0, len(data), 32000):
                await ws.send(data[start:start + 32000])
            await ws.recv()  # the first event: the stream is under way
            ws.transport.abort()  # gone, without a close frame

    before = samples(server.port)
    asyncio.run(vanish())
    moved = changes(server.port, before, "errors/disconnected")
    assert moved == {"errors/disconnected": 1.0}, moved
    assert not any(r.exc_info for r in caplog.records), "a traceback was logged"


def test_a_vanished_wyoming_stream_is_counted_as_disconnected(server, speech, caplog):
    caplog.set_level(logging.INFO, logger="asr.serve")
    started = asyncio.run_coroutine_threadsafe(
        wyoming.start(server.app, wyoming.parse_uri("tcp://127.0.0.1:0"), reuse_port=False), server.loop).result(10)
    port = started._server.sockets[0].getsockname()[1]
    data, _ = pcm(speech)

    async def vanish() -> None:
        client = AsyncTcpClient("127.0.0.1", port)
        await client.connect()
        await client.write_event(AudioStart(rate=SAMPLE_RATE, width=2, channels=1).event())
        for start in range(0, SAMPLE_RATE * 2 * 4, 3200):  # 4 s of it
            await client.write_event(AudioChunk(rate=SAMPLE_RATE, width=2, channels=1,
                                                audio=data[start:start + 3200]).event())
        client._writer.transport.abort()

    try:
        before = samples(server.port)
        asyncio.run(vanish())
        moved = changes(server.port, before, "errors/disconnected")
    finally:
        asyncio.run_coroutine_threadsafe(_stopped(started), server.loop).result(10)
    assert moved == {"errors/disconnected": 1.0}, moved
    assert any(r.getMessage() == "wyoming stream dropped: the client went away" for r in caplog.records)
    assert not any(r.exc_info for r in caplog.records), "a traceback was logged"


async def _stopped(server: wyoming.WyomingServer) -> None:
    await server.stop(5.0)
