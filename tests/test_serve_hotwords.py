"""asr.serve: a hotword list per connection, in the start message."""
from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import soundfile as sf
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from asr.decoding.decoder import Decoder
from asr.model.recognizer import Recognizer
from asr.pretrained import default_lm_path, default_model_path
from asr.server.app import Limits
from asr.server.protocol import ProtocolError, Start, parse_text
from asr.server.recognition import Recognition
from test_serve import ServerThread

pytestmark = pytest.mark.skipif(default_model_path() is None or default_lm_path() is None,
                                reason="no bundled model and LM")


@pytest.fixture(scope="module")
def server():
    recognizer = Recognizer.load(backend="onnx")
    srv = ServerThread(Recognition(recognizer, Decoder.load(recognizer.tokenizer)), Limits(max_streams=4))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def name_pcm(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, int]:
    if not shutil.which("espeak-ng"):
        pytest.skip("espeak-ng is not installed")
    path = tmp_path_factory.mktemp("hot") / "name.wav"
    subprocess.run(["espeak-ng", "-v", "en-us+m3", "-w", str(path), "the meeting with jessica zelnikova is at noon"],
                   check=True, capture_output=True)
    samples, rate = sf.read(path, dtype="int16")
    return samples.tobytes(), rate


async def _finals(url: str, start: dict, data: bytes) -> tuple[list[dict], int]:
    async with connect(url) as ws:
        await ws.send(json.dumps(start))
        if not data:  # a refused start: the server answers and closes
            events = []
            try:
                while True:
                    events.append(json.loads(await ws.recv()))
            except ConnectionClosed:
                return events, ws.close_code
        for offset in range(0, len(data), 6400):
            await ws.send(data[offset:offset + 6400])
        await ws.send(json.dumps({"type": "end"}))
        events = [json.loads(m) async for m in ws]
    return events, ws.close_code


def test_the_start_message_carries_a_list() -> None:
    assert parse_text('{"hotwords": ["okonkwo 5"]}', True) == Start(16000, ("okonkwo 5",))
    assert parse_text('{"sample_rate": 8000, "hotwords": "a\\nb c"}', True) == Start(8000, ("a", "b c"))
    with pytest.raises(ProtocolError, match="list of strings"):
        parse_text('{"hotwords": [1, 2]}', True)


def test_a_connection_gets_its_own_words(server, name_pcm) -> None:
    data, rate = name_pcm
    listed, code = asyncio.run(_finals(server.url, {"sample_rate": rate, "hotwords": ["jessica zelnikova 12"]}, data))
    assert code == 1000
    assert any("JESSICA ZELNIKOVA" in e.get("plain", e["text"]).upper() for e in listed if e["is_final"])
    plain, code = asyncio.run(_finals(server.url, {"sample_rate": rate}, data))  # the next connection: no list
    assert code == 1000 and not any("ZELNIKOVA" in e["text"].upper() for e in plain if e["is_final"])  # not in the LM


def test_a_bad_list_closes_the_stream_with_1007(server) -> None:
    events, code = asyncio.run(_finals(server.url, {"sample_rate": 16000, "hotwords": ["okonkwo", "r2d2"]}, b""))
    assert code == 1007 and events == [{"error": "hotwords:2: 'r2d2' cannot be spelled with the model's "
                                                 "units ('2'; write numbers as words)", "code": 1007}]
