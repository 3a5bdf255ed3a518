"""Wyoming (Home Assistant, Rhasspy): the recognizer on a TCP port of its own (`asr.serve --wyoming tcp://HOST:PORT`).

Built on the `wyoming` library's events and framing. On one connection a client may send, as often as it likes:
    describe                                   -> info: the model, English, transcript streaming supported
    transcribe {language}                      optional, before audio-start: asks for the streamed transcript
    audio-start {rate, width, channels}        opens a stream (PCM of any rate, 1, 2 or 4 bytes, any channels)
    audio-chunk {rate, width, channels} + PCM  its audio, any length
    audio-stop                                 -> transcript {text}: the finals joined, as asr.transcribe prints them
After a transcribe the stream answers in the library's streaming order: transcript-start at audio-start, a
transcript-chunk per final as soon as the audio holds its endpoint (the chunks joined are the transcript's text),
and at audio-stop the last chunks, transcript, transcript-stop. Wyoming streams go through the worker's `Engine`,
batched with its WebSocket streams, and count against the same --max-streams. Events out of order, audio that
cannot be read, another language: an error event {text, code} (the open stream, if any, is dropped) and the
connection goes on; unknown events are ignored, as the protocol asks. `WyomingServer.stop` ends every open stream
as if its audio-stop had come (its transcript), then closes the connections.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from wyoming.asr import Transcribe, Transcript, TranscriptChunk, TranscriptStart, TranscriptStop
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event, async_read_event
from wyoming.info import AsrModel, AsrProgram, Attribution, Describe, Info
from wyoming.ping import Ping, Pong
from wyoming.server import AsyncEventHandler

from asr.decoding.endpoint import Emission
from asr.server import metrics, pcm
from asr.server.session import AudioBuffer, stepped

if TYPE_CHECKING:
    from asr.server.app import App
    from asr.server.recognition import Stream

log = logging.getLogger("asr.serve")


@dataclass(frozen=True)
class Service:
    """Where the Wyoming service listens, and the model name its info reports."""
    host: str
    port: int
    model: str = "asr-default"

    @property
    def uri(self) -> str:
        return f"tcp://{f'[{self.host}]' if ':' in self.host else self.host}:{self.port}"


def parse_uri(text: str) -> Service:
    """`tcp://HOST:PORT` -> Service; ValueError with a one-line reason otherwise."""
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:  # a port that is not a number, or out of range
        raise ValueError(f"bad Wyoming address {text!r}: expected tcp://HOST:PORT with PORT in 0..65535") from None
    if parts.scheme != "tcp" or not parts.hostname or port is None or parts.path not in ("", "/") or parts.query:
        raise ValueError(f"bad Wyoming address {text!r}: expected tcp://HOST:PORT (such as tcp://0.0.0.0:10300)")
    return Service(parts.hostname, port)


def model_name(model: str | None, onnx_dir: str | None, int8: bool) -> str:
    """The name describe reports: the bundled model's, or the --model/--onnx-dir file or folder's."""
    path = onnx_dir or model
    return (Path(path).stem if path else "asr-default") + ("-int8" if int8 else "")


def info(model: str) -> Info:
    """The answer to describe: one English model, with streamed transcripts."""
    try:
        release = version("asr")
    except PackageNotFoundError:
        release = None
    made = Attribution(name="asr", url="")
    return Info(asr=[AsrProgram(
        name="asr", attribution=made, installed=True, version=release,
        description="asr: streaming English speech recognition on CPU",
        models=[AsrModel(name=model, attribution=made, installed=True, version=release, languages=["en"],
                         description="streaming English CTC model (asr.serve)")],
        supports_transcript_streaming=True)])


class Refused(Exception):
    """A request the service cannot follow; the client gets an error event with `code`."""

    def __init__(self, text: str, code: str):
        super().__init__(text)
        self.code = code


def _format(data: dict, event: str) -> tuple[int, int, int]:
    """(rate, width, channels) of an audio-start or audio-chunk; Refused when missing or unusable."""
    try:
        return pcm.check_format(*(data[key] for key in ("rate", "width", "channels")))
    except KeyError:
        raise Refused(f"{event} needs rate, width and channels", "bad-audio") from None
    except ValueError as err:
        raise Refused(f"{event}: {err}", "bad-audio") from None


class Connection(AsyncEventHandler):
    """One client: its events in order, at most one open stream at a time."""

    def __init__(self, server: WyomingServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        super().__init__(reader, writer)
        self.server = server
        self.streaming = False  # transcribe came: stream the transcript
        self.stream: Stream | None = None
        self.buffer: AudioBuffer | None = None
        self.form: tuple[int, int, int] = (0, 0, 0)  # the open stream's (rate, width, channels)
        self.finals: list[str] = []

    async def run(self) -> None:
        """Events until the client leaves, idles or the server stops; never raises."""
        try:
            while (event := await self._next()) is not None:
                try:
                    await self.handle_event(event)
                except Refused as err:
                    self._drop()
                    self.server.app.note("wyoming request refused", code=err.code, reason=str(err))
                    await self.write_event(Error(str(err), err.code).event())
                except (ConnectionError, asyncio.IncompleteReadError):
                    raise
                except Exception as err:  # a bug or a model failure on this stream only
                    self._drop()
                    log.exception("wyoming stream failed")
                    await self.write_event(Error(f"internal error: {type(err).__name__}", "internal").event())
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away
        finally:
            # A client gone in the middle of a stream is counted and logged as on /asr (at a stop, a stream still
            # open after its grace is dropped by the server, not the client).
            if self.stream is not None and not self.server.stopping.done():
                metrics.error("disconnected")
                self.server.app.note("wyoming stream dropped: the client went away",
                                     audio_s=round(self.stream.seconds, 3))
            self._drop()
            self.writer.close()

    async def _tell(self, event: Event) -> None:
        try:
            await self.write_event(event)
        except ConnectionError:
            pass

    async def _next(self) -> Event | None:
        """The next event; None once the client left, idled or sent what is not an event, or the server stops
        (then an open stream ends with its transcript)."""
        if not self.server.stopping.done():
            read = asyncio.ensure_future(async_read_event(self.reader))
            done, _ = await asyncio.wait({read, self.server.stopping}, timeout=self.server.app.limits.idle_timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
            if read in done:
                try:
                    event = read.result()
                except (KeyError, AttributeError, TypeError):  # JSON, but not an event's header
                    event = None
                if event is None and not self.reader.at_eof():
                    await self._tell(Error("malformed event: expected a JSON header line (Wyoming framing)",
                                           "malformed").event())
                    self._drop()  # refused by the server, not dropped by the client
                return event
            read.cancel()
        if not self.server.stopping.done():
            await self._tell(Error(f"idle: no event for {self.server.app.limits.idle_timeout:g} s", "idle").event())
            self._drop()  # ended by the server, not dropped by the client
        elif self.stream is not None:
            await self._finish(time.perf_counter())
        return None

    async def handle_event(self, event: Event) -> bool:
        """One event (Refused when it breaks the protocol)."""
        arrived = time.perf_counter()
        if not isinstance(event.data, dict):
            raise Refused(f"malformed {event.type} event: its data must be a JSON object", "malformed")
        if Describe.is_type(event.type):
            await self.write_event(self.server.info.event())
        elif Ping.is_type(event.type):
            await self.write_event(Pong(Ping.from_event(event).text).event())
        elif Transcribe.is_type(event.type):
            if self.stream is not None:
                raise Refused("transcribe while a stream is open: send audio-stop first", "out-of-order")
            language = Transcribe.from_event(event).language
            if language is not None and not isinstance(language, str):
                raise Refused(f"transcribe: language must be a string (got {language!r})", "malformed")
            if language and language.lower().replace("_", "-").split("-")[0] != "en":
                raise Refused(f"language {language!r} is not supported: this model transcribes English (en)",
                              "unsupported-language")
            self.streaming = True
        elif AudioStart.is_type(event.type):
            if self.stream is not None:
                raise Refused("audio-start while a stream is open: send audio-stop first", "out-of-order")
            await self._open(_format(event.data, "audio-start"))
        elif AudioChunk.is_type(event.type):
            if self.stream is None:
                raise Refused("audio-chunk before audio-start", "out-of-order")
            form = _format(event.data, "audio-chunk")
            if form != self.form:
                raise Refused(f"audio-chunk's format (rate, width, channels) {form} differs from audio-start's "
                              f"{self.form}", "bad-audio")
            data = event.payload or b""
            if len(data) > self.server.app.limits.max_message:
                raise Refused(f"audio-chunk of {len(data)} bytes is over the limit of "
                              f"{self.server.app.limits.max_message}", "too-big")
            try:
                self.buffer.push(pcm.samples(data, *form[1:]))
            except ValueError as err:
                raise Refused(f"audio-chunk: {err}", "bad-audio") from None
            async for emission in stepped(self.server.app.engine, self.stream, self.buffer, arrived):
                await self._emitted(emission)
        elif AudioStop.is_type(event.type):
            if self.stream is None:
                raise Refused("audio-stop before audio-start", "out-of-order")
            await self._finish(arrived)
        return True  # other events are ignored, as the protocol asks

    async def _open(self, form: tuple[int, int, int]) -> None:
        limit = self.server.app.limits.max_streams
        if self.server.live + self.server.app.live >= limit:
            raise Refused(f"server busy: all {limit} streams in use", "busy")
        self.stream, self.form, self.finals = self.server.app.engine.open(), form, []
        self.buffer = AudioBuffer(self.server.app.limits.chunk_samples, form[0])
        self.server.live += 1
        if self.streaming:
            await self.write_event(TranscriptStart(language="en").event())

    async def _emitted(self, emission: Emission) -> None:
        """A final joins the transcript (and goes out as a chunk when streaming); partials are not sent."""
        if emission.is_final:
            if self.streaming:
                await self.write_event(TranscriptChunk((" " if self.finals else "") + emission.text).event())
            self.finals.append(emission.text)

    async def _finish(self, since: float) -> None:
        """End of the open stream's audio: its last finals, then the transcript."""
        engine, stream = self.server.app.engine, self.stream
        self.buffer.end()
        async for emission in stepped(engine, stream, self.buffer, since):
            await self._emitted(emission)
        for emission in await engine.finish(stream):
            await self._emitted(emission)
        await self.write_event(Transcript(" ".join(self.finals), language="en").event())
        if self.streaming:
            await self.write_event(TranscriptStop().event())
        self.server.app.note("wyoming stream closed", audio_s=round(stream.seconds, 3), finals=len(self.finals))
        self._drop()

    def _drop(self) -> None:
        """Forget the open stream (if any) and the transcribe request."""
        if self.stream is not None:
            self.server.live -= 1
        self.stream, self.buffer, self.streaming, self.finals = None, None, False, []


class WyomingServer:
    """The Wyoming port of one serving process, its streams run by `app.engine`."""

    def __init__(self, app: App, service: Service):
        self.app, self.service, self.info = app, service, info(service.model)
        self.live = 0  # streams open now
        self.stopping: asyncio.Future = asyncio.get_running_loop().create_future()
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task] = set()

    async def start(self, reuse_port: bool) -> int:
        """Listen (`reuse_port`: share the port with other workers, SO_REUSEPORT); the port."""
        self._server = await asyncio.start_server(self._connected, self.service.host, self.service.port,
                                                  reuse_port=reuse_port)
        return self._server.sockets[0].getsockname()[1]

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._connections.add(task)
        try:
            await Connection(self, reader, writer).run()
        finally:
            self._connections.discard(task)

    def stop(self, timeout: float) -> asyncio.Task:
        """Stop listening; every open stream ends with its transcript. A task: True once every connection is
        closed, False if some were still open after `timeout` seconds (they are then dropped)."""
        if not self.stopping.done():
            self.stopping.set_result(None)
        if self._server is not None:
            self._server.close()

        async def closed() -> bool:
            if not self._connections:
                return True
            _, left = await asyncio.wait(set(self._connections), timeout=timeout)
            for task in left:
                task.cancel()
            return not left
        return asyncio.get_running_loop().create_task(closed())


async def start(app: App, service: Service, reuse_port: bool = True) -> WyomingServer:
    """A WyomingServer for `app`, listening at `service` (OSError if it cannot). With `reuse_port` (SO_REUSEPORT) it
    shares the port with the other workers and with the socket that `asr.serve` holds on it while it runs."""
    server = WyomingServer(app, service)
    try:
        await server.start(reuse_port)
    except OSError as err:
        raise OSError(err.errno, f"{err.strerror or err} (the Wyoming port, {service.uri})") from None
    return server
