"""asr.serve --wyoming with the wyoming library's own client: describe, whole and streamed transcripts equal to
asr.transcribe's text, errors for requests out of order, a bad address, and the graceful stop."""
from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from wyoming.asr import Transcribe, Transcript, TranscriptChunk, TranscriptStart, TranscriptStop
from wyoming.audio import AudioChunk, AudioStart, AudioStop, wav_to_chunks
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event, async_read_event
from wyoming.info import Describe, Info

from asr import serve
from asr.audio import SAMPLE_RATE
from asr.server import pcm
from test_serve import EXAMPLES, ROOT, ServerProcess

READ_TIMEOUT = 60.0  # seconds for one event on a loaded machine


class Served(ServerProcess):
    """`python -m asr.serve --port 0 --wyoming tcp://127.0.0.1:0 ARGS`, with a Wyoming client at its port."""

    def __init__(self, *args: str) -> None:
        super().__init__(*args, wyoming=True)

    def client(self) -> AsyncTcpClient:
        return AsyncTcpClient("127.0.0.1", self.wyoming_port, connect_timeout=10, read_timeout=READ_TIMEOUT)


@pytest.fixture(scope="module")
def audio(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both examples with a second of silence after each (two finals), as 16 kHz mono and 48 kHz stereo WAV."""
    a, b = (sf.read(EXAMPLES / name, dtype="float32")[0] for name in ("synthetic_slt.flac", "speechocean762_0813_0233.flac"))
    gap = np.zeros(SAMPLE_RATE, np.float32)
    wave16 = np.concatenate([a, gap, b, gap])
    folder = tmp_path_factory.mktemp("wyoming")
    sf.write(folder / "mono16k.wav", wave16, SAMPLE_RATE, subtype="PCM_16")
    sf.write(folder / "stereo48k.wav", np.repeat(wave16, 3)[:, None].repeat(2, axis=1), 48000, subtype="PCM_16")
    return {"mono": folder / "mono16k.wav", "stereo": folder / "stereo48k.wav"}


@pytest.fixture(scope="module")
def server_and_texts(audio: dict[str, Path]):
    """The server, and what `python -m asr.transcribe` prints for each file (run while the server loads)."""
    run = subprocess.Popen([sys.executable, "-m", "asr.transcribe", str(audio["mono"]), str(audio["stereo"])],
                           cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    srv = Served("--workers", "1")
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    texts = dict(line.split("\t") for line in out.splitlines())
    yield srv, {key: texts[str(path)] for key, path in audio.items()}
    srv.stop()


@pytest.fixture(scope="module")
def server(server_and_texts) -> Served:
    return server_and_texts[0]


@pytest.fixture(scope="module")
def texts(server_and_texts) -> dict[str, str]:
    return server_and_texts[1]


def chunks(path: Path) -> list[Event]:
    """audio-start, 1024-frame audio-chunks and audio-stop for a WAV file (the library's own splitter)."""
    with wave.open(str(path), "rb") as wav:
        return [e.event() for e in wav_to_chunks(wav, 1024, start_event=True, stop_event=True)]


async def exchange(client: AsyncTcpClient, send: list[Event], expect: int) -> list[Event]:
    """Send the events, then read `expect` events."""
    for event in send:
        await client.write_event(event)
    return [await client.read_event() for _ in range(expect)]


def test_describe_reports_the_english_model_with_streaming(server):
    async def ask() -> Info:
        async with server.client() as client:
            (answer,) = await exchange(client, [Describe().event()], 1)
        return Info.from_event(answer)
    info = asyncio.run(ask())
    (program,) = info.asr
    assert program.name == "asr" and program.installed and program.supports_transcript_streaming
    (model,) = program.models
    assert model.name == "asr-default" and model.languages == ["en"] and model.installed and model.version


def test_whole_transcript_equals_asr_transcribe(server, texts, audio):
    async def whole() -> list[Event]:
        async with server.client() as client:
            return await exchange(client, chunks(audio["mono"]), 1)
    (event,) = asyncio.run(whole())
    assert Transcript.is_type(event.type), event
    transcript = Transcript.from_event(event)
    assert transcript.text == texts["mono"] and transcript.language == "en"
    assert transcript.text.count(".") + transcript.text.count("?") >= 2  # both sentences, cased and punctuated


def test_streamed_transcript_comes_chunk_by_chunk_before_audio_stop(server, texts, audio):
    events = chunks(audio["stereo"])  # 48 kHz stereo: converted to 16 kHz mono as asr.transcribe reads the file
    assert AudioStart.from_event(events[0]).channels == 2

    async def streamed() -> tuple[list[Event], list[Event]]:
        async with server.client() as client:
            before = await exchange(client, [Transcribe(language="en").event(), *events[:-1]], 3)  # no audio-stop
            after = await exchange(client, events[-1:], 2)
        return before, after
    before, after = asyncio.run(streamed())
    assert [e.type for e in before] == ["transcript-start", "transcript-chunk", "transcript-chunk"], before
    assert TranscriptStart.from_event(before[0]).language == "en"
    assert [e.type for e in after] == ["transcript", "transcript-stop"] and TranscriptStop.is_type(after[1].type)
    text = "".join(TranscriptChunk.from_event(e).text for e in before[1:])
    assert text == Transcript.from_event(after[0]).text == texts["stereo"]


@pytest.mark.parametrize("send, message, code", [
    ([AudioChunk(16000, 2, 1, b"\0\0" * 160).event()], "audio-chunk before audio-start", "out-of-order"),
    ([AudioStop().event()], "audio-stop before audio-start", "out-of-order"),
    ([AudioStart(16000, 2, 1).event(), AudioStart(16000, 2, 1).event()], "audio-start while a stream is open",
     "out-of-order"),
    ([AudioStart(16000, 2, 1).event(), Transcribe().event()], "transcribe while a stream is open", "out-of-order"),
    ([Transcribe(language="de").event()], "language 'de' is not supported", "unsupported-language"),
    ([AudioStart(16000, 3, 1).event()], "width must be 1, 2 or 4 bytes (got 3)", "bad-audio"),
    ([AudioStart(16000, 2, 1).event(), AudioChunk(16000, 2, 1, b"\0\0\0").event()], "not a whole number", "bad-audio"),
    ([AudioStart(16000, 2, 1).event(), AudioChunk(8000, 2, 1, b"\0\0").event()], "differs from audio-start's",
     "bad-audio"),
])
def test_a_request_out_of_order_gets_one_error_and_the_connection_goes_on(server, send, message, code):
    async def wrong_then_right() -> tuple[Event, Event]:
        async with server.client() as client:
            (error,) = await exchange(client, send, 1)
            (answer,) = await exchange(client, [Describe().event()], 1)  # the same connection still answers
        return error, answer
    error, answer = asyncio.run(wrong_then_right())
    assert Error.is_type(error.type), error
    assert message in Error.from_event(error).text and Error.from_event(error).code == code
    assert Info.is_type(answer.type)


def test_a_broken_frame_gets_an_error_while_another_client_is_served(server, texts, audio):
    async def broken() -> Event | None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.wyoming_port)
        writer.write(b"this is not a JSON header\n")
        await writer.drain()
        event = await asyncio.wait_for(async_read_event(reader), READ_TIMEOUT)
        closed = await asyncio.wait_for(reader.read(), READ_TIMEOUT) == b""
        writer.close()
        return event if closed else None

    async def both() -> tuple[Event | None, list[Event]]:
        async with server.client() as client:  # a stream open on another connection meanwhile
            events = chunks(audio["mono"])
            await exchange(client, events[:len(events) // 2], 0)
            error = await broken()
            return error, await exchange(client, events[len(events) // 2:], 1)
    error, (event,) = asyncio.run(both())
    assert error is not None and Error.from_event(error).code == "malformed", error
    assert Transcript.from_event(event).text == texts["mono"]


def test_pcm_of_every_width_and_channel_count_reads_as_mono_float():
    wave = np.array([0.0, 0.5, -0.5, -1.0], np.float32)
    for width, kind, scale, offset in ((1, np.uint8, 128, 128), (2, "<i2", 2**15, 0), (4, "<i4", 2**31, 0)):
        np.testing.assert_array_equal(pcm.samples((wave * scale + offset).astype(kind).tobytes(), width, 1), wave)
    stereo = (np.stack([wave, np.zeros_like(wave)], axis=1) * 2**15).astype("<i2").tobytes()
    np.testing.assert_array_equal(pcm.samples(stereo, 2, 2), wave / 2)  # channels averaged
    with pytest.raises(ValueError, match="not a whole number of 2-byte, 2-channel frames"):
        pcm.samples(stereo[:-2], 2, 2)
    with pytest.raises(ValueError, match="rate, width and channels must be integers"):
        pcm.check_format(True, 2, 1)


@pytest.mark.parametrize("uri, message", [
    ("http://127.0.0.1:10300", "expected tcp://HOST:PORT"),
    ("tcp://127.0.0.1", "expected tcp://HOST:PORT"),
    ("tcp://127.0.0.1:99999", "PORT in 0..65535"),
    ("tcp://127.0.0.1:8765", "--wyoming needs a port of its own"),
])
def test_a_bad_wyoming_address_gives_one_error_line(uri, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        serve.main(["--port", "8765", "--wyoming", uri])
    assert exit_.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("asr.serve: error:") and message in last


def test_the_documented_client_runs_as_printed(server, texts, audio, capsys):
    doc = (ROOT / "docs" / "serving.md").read_text()
    example = next(b for b in re.findall(r"```python\n(.*?)```", doc, flags=re.S) if "AsyncTcpClient" in b)
    assert len(example.splitlines()) <= 20
    code = example.replace("port: int = 10300", f"port: int = {server.wyoming_port}").replace('"talk.wav"', repr(str(audio["mono"])))
    exec(compile(code, "docs/serving.md", "exec"), {})
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3 and lines[-1] == texts["mono"]
    assert " ".join(line.removeprefix("final ") for line in lines[:-1]) == texts["mono"]


def test_workers_share_the_wyoming_port_and_a_second_server_is_refused(audio, capsys, monkeypatch):
    monkeypatch.setattr(serve.logs, "setup", lambda *_: None)  # the second server runs here: keep pytest's logging
    srv = Served("--workers", "2", "--greedy")
    try:
        async def whole() -> Event:
            async with srv.client() as client:
                return (await exchange(client, chunks(audio["mono"]), 1))[0]
        async def several() -> list[Event]:
            return await asyncio.gather(*(whole() for _ in range(4)))
        texts = {Transcript.from_event(event).text for event in asyncio.run(several())}
        assert len(texts) == 1 and texts.pop()
        assert serve.main(["--port", "0", "--wyoming", f"tcp://127.0.0.1:{srv.wyoming_port}"]) == 1
        assert f"cannot listen for Wyoming on tcp://127.0.0.1:{srv.wyoming_port}" in capsys.readouterr().err
    finally:
        srv.stop()
    assert srv.proc.returncode == 0


def test_sigterm_ends_an_open_stream_with_its_transcript(server, texts, audio):
    """Last: it stops the module's server. The open stream gets the transcript of the audio sent so far."""
    async def cut_short() -> Event:
        async with server.client() as client:
            events = chunks(audio["mono"])
            await exchange(client, events[:-1], 0)  # everything but audio-stop
            await client.write_event(Describe().event())
            await client.read_event()  # the server has read the audio
            server.proc.send_signal(signal.SIGTERM)
            return await client.read_event()
    event = asyncio.run(cut_short())
    assert Transcript.from_event(event).text == texts["mono"]
    assert server.proc.wait(60) == 0
