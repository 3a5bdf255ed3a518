"""What a deployment of asr.serve relies on, on a real port (127.0.0.1): /healthz, /metrics, JSON logs,
a graceful stop on SIGTERM, and --workers N behind one port giving asr.stream's results."""
from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.request import urlopen

import numpy as np
import pytest
import soundfile as sf
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from test_serve import (EXAMPLES, ROOT, ServerProcess, decoder, pcm, recognizer, server,  # noqa: F401 (fixtures)
                        transcribe, without_compute)


def metric(text: str, name: str) -> float:
    """The value of an unlabelled sample in a Prometheus text exposition."""
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, flags=re.M)
    assert match, f"no {name} in /metrics"
    return float(match.group(1))


def test_healthz_and_metrics_answer(server):
    base = f"http://127.0.0.1:{server.port}"
    with urlopen(base + "/healthz", timeout=10) as health:
        assert health.status == 200 and health.read() == b"ok\n"
    before = urlopen(base + "/metrics", timeout=10).read().decode()
    data, _ = pcm(EXAMPLES / "synthetic_slt.flac")
    events, code = asyncio.run(transcribe(server.url, data))
    assert code == 1000 and events
    with urlopen(base + "/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        after = response.read().decode()
    seconds = len(data) / 2 / 16000
    assert metric(after, "asr_streams_total") == metric(before, "asr_streams_total") + 1
    assert metric(after, "asr_audio_seconds_total") - metric(before, "asr_audio_seconds_total") >= seconds - 1e-6
    assert metric(after, "asr_chunk_compute_seconds_count") > metric(before, "asr_chunk_compute_seconds_count")
    assert metric(after, "asr_event_latency_seconds_count") > metric(before, "asr_event_latency_seconds_count")
    assert metric(after, "asr_streams_open") == 0
    assert 'asr_errors_total{kind="idle"}' in after and 'asr_errors_total{kind="disconnected"}' in after


def speech(seconds: float) -> bytes:
    """`seconds` of int16 speech with no pauses long enough to end a segment: the example looped."""
    wave = sf.read(EXAMPLES / "speechocean762_0813_0233.flac", dtype="int16")[0]
    return np.resize(wave, round(seconds * 16000)).tobytes()


async def live_client(url: str, audio: bytes, started: asyncio.Event) -> tuple[list[dict], int | None]:
    """Stream `audio` in real time (100 ms messages) until the server closes; its events and close code."""
    events: list[dict] = []
    async with connect(url) as ws:
        async def receive() -> None:
            async for message in ws:
                events.append(json.loads(message))
                started.set()
        receiver = asyncio.create_task(receive())
        began = time.monotonic()
        try:
            for i, start in enumerate(range(0, len(audio), 3200)):
                await asyncio.sleep(max(0.0, began + i * 0.1 - time.monotonic()))
                await ws.send(audio[start:start + 3200])
        except ConnectionClosed:
            pass  # the server closed the stream: it is stopping
        await asyncio.wait_for(receiver, 60)
    return events, ws.close_code


@pytest.mark.serial  # real-time streams on two workers must drain within the grace period
def test_sigterm_finishes_every_open_stream_then_exits_0():
    srv = ServerProcess("--greedy", "--workers", "2", "--log-json")
    url = f"ws://127.0.0.1:{srv.port}/asr"

    async def scene() -> list[tuple[list[dict], int | None]]:
        started = [asyncio.Event() for _ in range(3)]
        clients = [asyncio.create_task(live_client(url, speech(30.0), s)) for s in started]
        await asyncio.wait_for(asyncio.gather(*(s.wait() for s in started)), 60)  # every stream is live
        await asyncio.sleep(0.7)  # mid-speech
        srv.proc.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(asyncio.gather(*clients), 90)
    try:
        results = asyncio.run(scene())
        srv.proc.wait(150)  # the workers finish within their own 30 s; a busy machine adds to it
    finally:
        if srv.proc.poll() is None:
            srv.stop()
    assert srv.proc.returncode == 0
    for events, code in results:
        assert code == 1001, code
        assert events[-1]["is_final"] and events[-1]["text"], events[-3:]
        assert events[-1]["time"] < 30.0  # the stream was cut short, not played to the end
    time.sleep(0.5)  # the drain thread's last lines
    entries = [json.loads(line) for line in srv.log if line.strip()]
    closed = [e for e in entries if e["message"] == "stream closed"]
    assert len(closed) == 3 and all(e["close"] == 1001 and e["finals"] >= 1 for e in closed)
    assert {e["worker"] for e in entries if e["message"] == "stopped"} == {0, 1}


def test_two_workers_serve_clients_with_the_results_of_asr_stream(tmp_path: Path):
    path = EXAMPLES / "speechocean762_0813_0233.flac"
    run = subprocess.run([sys.executable, "-m", "asr.stream", "--file", str(path), "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, check=True)
    expected = without_compute([json.loads(line) for line in run.stdout.splitlines()])
    data, _ = pcm(path)
    srv = ServerProcess("--workers", "2")
    url = f"ws://127.0.0.1:{srv.port}/asr"

    async def on_worker() -> tuple[str, list[dict], int]:
        async with connect(url) as ws:
            worker = ws.response.headers["X-ASR-Worker"]
            for start in range(0, len(data), 3200):
                await ws.send(data[start:start + 3200])
            await ws.send(json.dumps({"type": "end"}))
            events = [json.loads(m) async for m in ws]
        return worker, events, ws.close_code

    async def until_two_workers() -> dict[str, tuple[list[dict], int]]:
        seen: dict[str, tuple[list[dict], int]] = {}
        for _ in range(12):  # the kernel picks the worker by a hash of the client's port: a few tries suffice
            pair = await asyncio.gather(on_worker(), on_worker())
            seen.update((worker, (events, code)) for worker, events, code in pair)
            if len(seen) == 2:
                break
        return seen
    try:
        seen = asyncio.run(until_two_workers())
    finally:
        srv.stop()
    assert srv.proc.returncode == 0
    assert set(seen) == {"0", "1"}
    for events, code in seen.values():
        assert code == 1000 and without_compute(events) == expected


def test_the_workers_load_side_by_side_and_the_server_says_when_it_is_ready() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "asr.serve", "--port", "0", "--greedy", "--workers", "2",
                             "--log-json"], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        ready = json.loads(proc.stderr.readline())
        port = re.search(r"http://127\.0\.0\.1:(\d+)/ ", ready["message"]).group(1)
        with urlopen(f"http://127.0.0.1:{port}/healthz") as health:  # ready means ready: it answers at once
            assert health.status == 200
    finally:
        proc.terminate()
        proc.wait(60)
    assert ready["message"].startswith(f"ready in {ready['ready_s']:g} s: listening on http://127.0.0.1:{port}/")
    assert ready["workers"] == 2 and len(ready["loaded_s"]) == 2
    assert max(ready["loaded_s"]) <= ready["loading_s"] <= ready["ready_s"]
    assert ready["loading_s"] < sum(ready["loaded_s"])  # the two loads overlapped: one after the other takes the sum
