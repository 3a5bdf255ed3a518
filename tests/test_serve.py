"""asr.serve with real clients on a real port: results, batching, protocol errors, limits."""
from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
from pathlib import Path
from urllib.request import urlopen

import numpy as np
import pytest
import soundfile as sf
from websockets.asyncio.client import connect

from asr.audio import SAMPLE_RATE
from asr.audio.chunks import rechunk
from asr.audio.files import read_blocks
from asr.decoding.decoder import Decoder
from asr.decoding.endpoint import emissions
from asr.model.recognizer import Recognizer
from asr.server.app import App, Limits, start
from asr.server.engine import Engine
from asr.server.recognition import Recognition

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "asr" / "examples"


class ServerThread:
    """An App on 127.0.0.1 (a free port) in a thread of its own, with its own event loop."""

    def __init__(self, recognition: Recognition, limits: Limits):
        self.app = App(Engine(recognition), limits)
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(10), "server did not start"

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(start(self.app, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/asr"

    def stop(self) -> None:
        async def close() -> None:
            self.server.close()
            await self.server.wait_closed()
        asyncio.run_coroutine_threadsafe(close(), self.loop).result(10)
        self.app.engine.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


class ServerProcess:
    """`python -m asr.serve --port 0 ARGS` in a subprocess; the port comes from its first line. `wyoming`: also
    `--wyoming tcp://127.0.0.1:0`, whose port (`wyoming_port`) comes from the second line."""

    def __init__(self, *args: str, wyoming: bool = False):
        served = ["--wyoming", "tcp://127.0.0.1:0"] if wyoming else []
        self.proc = subprocess.Popen([sys.executable, "-m", "asr.serve", "--port", "0", *served, *args], cwd=ROOT,
                                     stderr=subprocess.PIPE, text=True)
        self.port = self._port(r"http://127\.0\.0\.1:(\d+)/", "listening")
        self.wyoming_port = (self._port(r"Wyoming on tcp://127\.0\.0\.1:(\d+) \(model asr-default\)", "Wyoming")
                             if wyoming else None)
        self.log: list[str] = []  # the rest of its stderr, drained so that the pipe never fills
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()

    def _port(self, pattern: str, what: str) -> int:
        """The port in the next line of the server's log (`pattern`'s group); AssertionError without it."""
        line = self.proc.stderr.readline()
        match = re.search(pattern, line)
        if not match:
            self.proc.kill()
            raise AssertionError(f"no {what} line from asr.serve: {line!r}")
        return int(match.group(1))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)  # several workers, each with torch loaded, take a while to exit on a busy machine
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise


@pytest.fixture(scope="module")
def recognizer() -> Recognizer:
    return Recognizer.load()


@pytest.fixture(scope="module")
def decoder(recognizer: Recognizer) -> Decoder:
    return Decoder.load(recognizer.tokenizer, "bundled")  # asr.stream's default with the bundled model


@pytest.fixture(scope="module")
def server(recognizer: Recognizer, decoder: Decoder):
    srv = ServerThread(Recognition(recognizer, decoder), Limits(max_streams=12, max_message=64 * 1024))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def long_audio(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both examples with silence between and after (several segments), as 16 kHz int16 WAV."""
    a, b = (sf.read(EXAMPLES / name, dtype="float32")[0] for name in ("synthetic_slt.flac", "speechocean762_0813_0233.flac"))
    gap = np.zeros(SAMPLE_RATE, np.float32)
    path = tmp_path_factory.mktemp("audio") / "long.wav"
    sf.write(path, np.concatenate([a, gap, b, gap, a[: SAMPLE_RATE]]), SAMPLE_RATE, subtype="PCM_16")
    return path


def reference(recognizer: Recognizer, decoder: Decoder, path: Path) -> list[dict]:
    """What `asr.stream --file PATH --json` prints: the shared emission loop over 500 ms chunks."""
    return [e.to_json() for e in emissions(recognizer, rechunk(read_blocks(path), SAMPLE_RATE // 2), decoder)]


def pcm(path: Path) -> tuple[bytes, int]:
    samples, rate = sf.read(path, dtype="int16")
    return samples.tobytes(), rate


async def transcribe(url: str, data: bytes, rate: int | None = None, piece: int = 3200, delay: float = 0.0,
                     pace: float = 0.0) -> tuple[list[dict], int]:
    """Send `data` (int16 PCM) in `piece`-byte messages, then end; the events and the close code."""
    await asyncio.sleep(delay)
    async with connect(url, max_size=None) as ws:
        if rate is not None:
            await ws.send(json.dumps({"sample_rate": rate}))
        for start in range(0, len(data), piece):
            await ws.send(data[start:start + piece])
            await asyncio.sleep(pace)
        await ws.send(json.dumps({"type": "end"}))
        events = [json.loads(m) async for m in ws]
    return events, ws.close_code


def without_compute(events: list[dict]) -> list[dict]:
    return [{k: v for k, v in e.items() if k != "compute_ms"} for e in events]


def test_served_stream_equals_asr_stream_file(server, recognizer, decoder, long_audio):
    run = subprocess.run([sys.executable, "-m", "asr.stream", "--file", str(long_audio), "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, check=True)
    expected = [json.loads(line) for line in run.stdout.splitlines()]
    assert without_compute(expected) == without_compute(reference(recognizer, decoder, long_audio))
    data, _ = pcm(long_audio)
    events, code = asyncio.run(transcribe(server.url, data, piece=2 * 1234))  # odd-sized pieces, rechunked
    assert code == 1000
    assert without_compute(events) == without_compute(expected)
    finals = [e.get("plain", e["text"]) for e in events if e["is_final"]]  # plain words beside restored text
    assert len(finals) >= 2 and "KEEP IT" in finals[1]  # the second file, a speechocean762 training utterance
    assert set(events[0]) == {"segment", "start", "time", "text", "keep", "new", "is_final", "compute_ms"}
    partials = [e for e in events if not e["is_final"]]  # after 500 ms chunks, where the text changed
    assert partials[0]["text"] and all(round(e["time"] * 2, 6).is_integer() for e in partials[:-1])  # none empty first
    assert all(a["text"] != b["text"] for a, b in zip(partials, partials[1:]) if a["segment"] == b["segment"])


def test_other_sample_rate_is_resampled(server, recognizer, decoder, tmp_path):
    wave, rate = sf.read(EXAMPLES / "synthetic_slt.flac", dtype="float32")
    path = tmp_path / "slt48k.wav"
    sf.write(path, np.repeat(wave, 3), 48000, subtype="PCM_16")  # same words at 48 kHz
    expected = [e["text"] for e in reference(recognizer, decoder, path) if e["is_final"]]
    events, code = asyncio.run(transcribe(server.url, *pcm(path)))
    assert code == 1000 and [e["text"] for e in events if e["is_final"]] == expected and expected


@pytest.mark.serial  # batching needs the streams' chunks to arrive together
def test_a_stream_gives_the_same_events_alone_or_beside_seven_others(server, long_audio):
    data, _ = pcm(long_audio)
    alone, _ = asyncio.run(transcribe(server.url, data))
    rows, batches = server.app.engine.rows, server.app.engine.batches

    async def crowd() -> list[tuple[list[dict], int]]:
        # every stream starts within 70 ms of the first and cuts its audio differently: on a fast machine a stream
        # is sent in a fraction of a second, and starts further apart would leave the streams nothing to share
        return await asyncio.gather(*(transcribe(server.url, data, piece=1600 + 320 * i, delay=0.01 * i, pace=0.002)
                                      for i in range(8)))
    results = asyncio.run(crowd())
    assert all(code == 1000 for _, code in results)
    for events, _ in results:
        assert without_compute(events) == without_compute(alone)
    rows, batches = server.app.engine.rows - rows, server.app.engine.batches - batches
    assert rows / batches > 1.5, f"chunks were not batched: {rows} rows in {batches} passes"
    assert server.app.engine.fallbacks == 0  # every pass went through the model as one batched call



def test_the_page_and_its_scripts_are_served(server):
    base = f"http://127.0.0.1:{server.port}"
    with urlopen(base + "/") as page:
        html = page.read().decode()
        assert page.headers["Content-Type"].startswith("text/html") and "/app.js" in html
    with urlopen(base + "/app.js") as script:
        assert "audioWorklet.addModule" in script.read().decode()
    with urlopen(base + "/worklet.js") as worklet:
        assert "registerProcessor" in worklet.read().decode()
    with pytest.raises(Exception) as missing:
        urlopen(base + "/secret")
    assert getattr(missing.value, "code", None) == 404


@pytest.mark.parametrize("args, status, message", [
    (["--port", "70000"], 2, "--port must be <= 65535"),
    (["--max-streams", "0"], 2, "--max-streams must be >= 1"),
    (["--batch-wait", "-5"], 2, "--batch-wait must be >= 0 ms"),
    (["--model", "/no/such/model.safetensors", "--port", "0"], 1, "asr.serve: error:"),
])
def test_bad_options_give_one_error_line(args, status, message):
    run = subprocess.run([sys.executable, "-m", "asr.serve", *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == status and message in run.stderr
    assert "Traceback" not in run.stderr


def test_the_command_serves_until_terminated(tmp_path):
    srv = ServerProcess("--greedy")
    try:
        data, _ = pcm(EXAMPLES / "synthetic_slt.flac")
        events, code = asyncio.run(transcribe(f"ws://127.0.0.1:{srv.port}/asr", data))
        assert code == 1000 and events[-1]["is_final"] and events[-1]["text"], events
    finally:
        srv.stop()
    assert srv.proc.returncode == 0


def test_the_documented_client_runs_as_printed(server, capsys):
    readme = (ROOT / "docs" / "serving.md").read_text()
    example = next(b for b in re.findall(r"```python\n(.*?)```", readme, flags=re.S) if "asyncio.client" in b)
    assert len(example.splitlines()) <= 20
    code = example.replace("ws://127.0.0.1:8765/asr", server.url).replace('"asr/examples/', repr(str(EXAMPLES)) + ' + "/')
    exec(compile(code, "docs/serving.md", "exec"), {})
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("partial") and lines[-1].startswith("final") and len(lines) >= 6
