"""asr.serve's POST /v1/audio/transcriptions driven by OpenAI's own Python package: every response format and
streaming give asr.transcribe's text; each bad request gets one clear error and the server serves on."""
from __future__ import annotations

import asyncio
import http.client
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from asr.api import Transcriber
from asr.decoding.hotwords import parse_hotwords
from asr.server.app import Limits
from asr.server.recognition import Recognition
from asr.server.uploads import GIVE_WAY_S, Abandoned, UploadJob
from asr.text.formats import Transcript
from test_serve import (EXAMPLES, ROOT, ServerThread, decoder, long_audio, pcm, recognizer,  # noqa: F401 (fixtures)
                        transcribe, without_compute)

openai = pytest.importorskip("openai", reason="the openai package is in the [test] extra")
TOKEN, MAX_UPLOAD = "s3cret", 1 << 20


@pytest.fixture(scope="module")
def server(recognizer, decoder):
    srv = ServerThread(Recognition(recognizer, decoder), Limits(token=TOKEN, max_upload=MAX_UPLOAD))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server) -> "openai.OpenAI":
    return openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key=TOKEN, max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def expected(recognizer, decoder, long_audio: Path) -> Transcript:
    """What asr.transcribe gives for the long audio: the command's JSON, and the API's Transcript (the same text)."""
    run = subprocess.run([sys.executable, "-m", "asr.transcribe", str(long_audio), "--format", "json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=180, check=True)
    transcript = Transcriber(recognizer, decoder).transcribe(long_audio)
    assert json.loads(run.stdout)["text"] == transcript.text and len(transcript.segments) >= 2
    return transcript


def upload(client, path: Path, **options):
    with open(path, "rb") as f:
        return client.audio.transcriptions.create(file=(path.name, f.read()), model="whisper-1", **options)


@pytest.mark.parametrize("fmt", ["json", "text", "srt", "vtt", "verbose_json"])
def test_every_format_gives_the_text_of_asr_transcribe(client, long_audio, expected, fmt):
    got = upload(client, long_audio, response_format=fmt, language="en",
                 **({"timestamp_granularities": ["word", "segment"]} if fmt == "verbose_json" else {}))
    if fmt == "json":
        assert got.text == expected.text
    elif fmt == "verbose_json":
        assert (got.text, got.language, got.duration) == (expected.text, "english", round(expected.duration, 3))
        assert [s.text for s in got.segments] == [s.text for s in expected.segments]
        assert [s.start for s in got.segments] == [round(s.start, 3) for s in expected.segments]
        assert [w.end for w in got.words] == [round(w.end, 3) for w in expected.words]
        assert " ".join(w.word for w in got.words) == expected.text  # restored words, one per plain word
    else:
        assert got == expected.render({"text": "txt"}.get(fmt, fmt))


def test_a_stream_sends_each_final_as_a_delta_then_the_whole_text(client, long_audio, expected):
    with open(long_audio, "rb") as f:
        events = list(client.audio.transcriptions.create(file=("long.wav", f.read()), model="whisper-1", stream=True))
    deltas = [e.delta for e in events if e.type == "transcript.text.delta"]
    assert len(deltas) == len(expected.segments) and events[-1].type == "transcript.text.done"
    assert "".join(deltas) == events[-1].text == expected.text
    partials = [e.text for e in events if e.type == "transcript.text.partial"]  # passed over unless asked for
    assert partials and all(isinstance(text, str) for text in partials)
    assert events.index(next(e for e in events if e.type == "transcript.text.partial")) < events.index(
        next(e for e in events if e.type == "transcript.text.delta"))  # the first words come before the first final


def test_the_prompt_is_a_hotword_list(client, recognizer, decoder, tmp_path):
    if not shutil.which("espeak-ng"):
        pytest.skip("espeak-ng is not installed")
    path = tmp_path / "name.wav"
    subprocess.run(["espeak-ng", "-v", "en-us+m3", "-w", str(path), "the meeting with jessica zelnikova is at noon"],
                   check=True, capture_output=True)  # a surname outside the bundled LM's 206k words
    favoured = decoder.with_hotwords(parse_hotwords(["jessica zelnikova 12", "okonkwo"], "prompt", recognizer.tokenizer))
    got = upload(client, path, prompt="jessica zelnikova 12, Okonkwo")
    assert got.text == Transcriber(recognizer, favoured).transcribe(path).text and "ZELNIKOVA" in got.text.upper()
    assert "ZELNIKOVA" not in upload(client, path).text.upper()  # the next request: no list


def raw_post(port: int, body: bytes, content_type: str, path: str = "/v1/audio/transcriptions") -> tuple[int, dict]:
    """A request the openai package will not send: the status and the JSON body."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("POST", path, body, {"Content-Type": content_type, "Authorization": f"Bearer {TOKEN}"})
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def form(**fields: str) -> tuple[bytes, str]:
    """A multipart body of text fields only, and its Content-Type."""
    parts = [f'--b\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n' for k, v in fields.items()]
    return ("".join(parts) + "--b--\r\n").encode(), "multipart/form-data; boundary=b"


BAD_UPLOADS = {  # name: (create() options, status, param, words in the message)
    "empty file": ({"file": ("empty.wav", b"")}, 400, "file", "empty.wav: the file is empty"),
    "not audio": ({"file": ("notes.wav", b"these are not the samples you are looking for\n" * 50)}, 400, "file",
                  "notes.wav: not readable audio"),
    "wrong format name": ({"response_format": "docx"}, 400, "response_format", "'docx' is not one of json, text"),
    "oversized": ({"file": ("big.wav", bytes(MAX_UPLOAD + 1))}, 413, "file", "upload limit of 1 MB"),
    "not English": ({"language": "fr"}, 400, "language", "English only"),
    "unspellable prompt": ({"prompt": "r2d2"}, 400, "prompt", "'r2d2' cannot be spelled"),
    "stream in srt": ({"stream": True, "response_format": "srt"}, 400, "response_format", "json or text"),
}


def test_each_bad_request_gets_one_clear_error_and_the_server_serves_on(server, client, long_audio, expected):
    good = (long_audio.name, long_audio.read_bytes())
    for name, (options, status, param, words) in BAD_UPLOADS.items():
        with pytest.raises(openai.APIStatusError) as refused:
            client.audio.transcriptions.create(**{"file": good, "model": "whisper-1", **options})
        error = refused.value.body
        assert refused.value.status_code == status, name
        assert error["param"] == param and error["type"] == "invalid_request_error", (name, error)
        assert words in error["message"] and "\n" not in error["message"], (name, error)
    wrong_key = openai.OpenAI(base_url=client.base_url, api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as refused:
        wrong_key.audio.transcriptions.create(file=good, model="whisper-1")
    assert refused.value.body["code"] == "invalid_api_key"
    status, body = raw_post(server.port, *form(model="whisper-1"), path="/v1/audio/translations")  # not served
    assert status == 404 and "POST /v1/audio/transcriptions" in body["error"]["message"]
    status, body = raw_post(server.port, *form(model="whisper-1"))
    assert status == 400 and body["error"]["param"] == "file" and "no file" in body["error"]["message"]
    status, body = raw_post(server.port, b'{"model": "whisper-1"}', "application/json")
    assert status == 415 and "multipart/form-data" in body["error"]["message"]
    assert upload(client, long_audio).text == expected.text  # the server serves on


def test_the_models_list_names_the_served_model(server, client):
    """OpenAI's clients call GET /v1/models (it was a 404): OpenAI's list shape, the one model served, behind the
    key."""
    models = list(client.models.list())
    assert [(m.id, m.object, m.owned_by) for m in models] == [("asr-default", "model", "asr")]
    assert abs(models[0].created - time.time()) < 3600 * 24
    wrong_key = openai.OpenAI(base_url=client.base_url, api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as refused:
        wrong_key.models.list()
    assert refused.value.body["code"] == "invalid_api_key"
    status, body = raw_post(server.port, *form(model="whisper-1"), path="/v1/models")
    assert status == 405 and "/v1/models takes GET only" in body["error"]["message"]


def test_a_live_stream_beside_an_upload_gives_its_own_events(server, client, long_audio, expected):
    data, _ = pcm(long_audio)
    alone, _ = asyncio.run(transcribe(server.url + f"?token={TOKEN}", data))

    async def both() -> tuple:
        uploaded = asyncio.to_thread(upload, client, long_audio)
        return await asyncio.gather(uploaded, transcribe(server.url + f"?token={TOKEN}", data, pace=0.005))
    uploaded, (events, code) = asyncio.run(both())
    assert uploaded.text == expected.text
    assert code == 1000 and without_compute(events) == without_compute(alone)


@pytest.mark.parametrize("page", ["docs/serving.md", "README.md"])
def test_the_documented_openai_example_runs_as_printed(server, capsys, page):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(), flags=re.S)
    example = next(b for b in blocks if "from openai import" in b)
    code = (example.replace("http://127.0.0.1:8765/v1", f"http://127.0.0.1:{server.port}/v1")
            .replace('api_key="unused"', f"api_key={TOKEN!r}").replace('"asr/examples/', repr(str(EXAMPLES)) + ' + "/')
            .replace('"talk.m4a"', repr(str(EXAMPLES / "synthetic_slt.flac"))))
    exec(compile(code, page, "exec"), {})
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines and lines[0][0].isupper()  # the cased text first
    if page == "docs/serving.md":  # then the stream's events, then subtitles
        events = [line.split(" ", 1)[0] for line in lines[1:] if line.startswith("transcript.")]
        assert {"transcript.text.partial", "transcript.text.delta"} <= set(events) and any("-->" in line for line in lines)


@pytest.mark.serial  # wall-clock bounds of a few tens of ms
def test_an_upload_gives_way_to_live_chunks_and_stops_when_abandoned(recognizer, decoder):
    engine = SimpleNamespace(busy=True, recognition=Recognition(recognizer, decoder))  # live chunks always waiting
    job = UploadJob(engine, decoder, None, None)
    began = time.monotonic()
    job.give_way(1.0)
    assert GIVE_WAY_S <= time.monotonic() - began < GIVE_WAY_S + 0.5  # it waited, but not for ever
    engine.busy, began = False, time.monotonic()
    job.give_way(1.0)
    assert time.monotonic() - began < GIVE_WAY_S / 2  # nothing to wait for
    job.abandoned.set()
    with pytest.raises(Abandoned):
        job.give_way(1.0)
