"""The WebSocket app: the page at GET /, the recognizer at ws://HOST:PORT/asr (see `protocol`).

Built on `websockets.asyncio.server`: `process_request` answers plain HTTP (the page, /healthz,
/metrics, 401, 404) before any handshake, and `handle` runs one stream per connection. A stream that
breaks the protocol, idles, or vanishes gets an error event and a close code (when it can still hear
one); the others go on untouched. `stop` ends every open stream as if its client had sent the end
message: its last final(s), then close code 1001.
"""
from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from dataclasses import dataclass
from http import HTTPStatus
from importlib import resources
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed, ConnectionClosedError
from websockets.http11 import Request, Response

from asr.endpoint import Emission
from asr.server import metrics, protocol
from asr.server.engine import Engine
from asr.server.protocol import End, ProtocolError, Start
from asr.server.session import AudioBuffer

log = logging.getLogger("asr.serve")
PAGES = {"/": ("index.html", "text/html; charset=utf-8"), "/app.js": ("app.js", "text/javascript"),
         "/worklet.js": ("worklet.js", "text/javascript")}


@dataclass
class Limits:
    max_streams: int = 64
    max_message: int = 256 * 1024  # bytes per audio message (8 s at 16 kHz)
    idle_timeout: float = 30.0  # seconds without a message
    chunk_samples: int = 8000  # 500 ms at 16 kHz: one partial per chunk, as in asr.stream
    token: str | None = None


class App:
    """Serves the page and the /asr streams of one `Engine`; `worker` numbers this process among several."""

    def __init__(self, engine: Engine, limits: Limits | None = None, worker: int | None = None):
        self.engine, self.limits, self.worker = engine, limits or Limits(), worker
        self.live = 0  # streams open now
        self.served = 0  # connections handled so far
        self.stopping = False
        self._stopped: asyncio.Future | None = None  # done once `stop` is called (made in the serving loop)

    def stop(self) -> None:
        """Stop: every open stream ends with its final(s) at its next message wait; /healthz says 503."""
        self.stopping = True
        if self._stopped is not None and not self._stopped.done():
            self._stopped.set_result(None)

    def note(self, message: str, **fields) -> None:
        """An INFO line in the log, with this worker's number among its fields."""
        log.info(message, extra=fields if self.worker is None else {"worker": self.worker, **fields})

    def _plain(self, status: int, body: bytes, kind: str) -> Response:
        headers = Headers([("Content-Type", kind), ("Content-Length", str(len(body))), ("Cache-Control", "no-store")])
        return Response(status, HTTPStatus(status).phrase, headers, body)

    def _page(self, path: str) -> Response:
        name, kind = PAGES[path]
        body = resources.files("asr.web").joinpath(name).read_bytes()
        headers = Headers([("Content-Type", kind), ("Content-Length", str(len(body))),
                           ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff")])
        return Response(200, "OK", headers, body)

    def _authorised(self, request: Request) -> bool:
        if self.limits.token is None:
            return True
        given = parse_qs(urlsplit(request.path).query).get("token", [""])[0]
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            given = given or auth[len("Bearer "):]
        return hmac.compare_digest(given.encode(), self.limits.token.encode())

    def process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        """Plain HTTP before the handshake: the page, or a refusal; None lets /asr through."""
        path = urlsplit(request.path).path
        upgrade = "websocket" in request.headers.get("Upgrade", "").lower()
        if path in PAGES and not upgrade:
            return self._page(path)
        if path == "/healthz" and not upgrade:  # the model is loaded before the server listens
            return self._plain(503, b"stopping\n", "text/plain") if self.stopping else self._plain(200, b"ok\n", "text/plain")
        if path == "/metrics" and not upgrade:
            return self._plain(200, *metrics.exposition())
        if path != "/asr":
            return connection.respond(HTTPStatus.NOT_FOUND, "not found: the page is at / and the socket at /asr\n")
        if not self._authorised(request):
            metrics.error("unauthorized")
            return connection.respond(HTTPStatus.UNAUTHORIZED, "missing or wrong token\n")
        return None

    def process_response(self, connection: ServerConnection, request: Request, response: Response) -> Response:
        """Name the worker that took the stream (X-ASR-Worker), when there are several."""
        if self.worker is not None:
            response.headers["X-ASR-Worker"] = str(self.worker)
        return response

    async def handle(self, ws: ServerConnection) -> None:
        """One stream, start to close; never raises."""
        self.served += 1
        number = self.served
        if self._stopped is None:
            self._stopped = asyncio.get_running_loop().create_future()
            if self.stopping:
                self._stopped.set_result(None)
        if self.live >= self.limits.max_streams:
            metrics.error(protocol.TRY_LATER)
            await _refuse(ws, ProtocolError(f"server busy: all {self.limits.max_streams} streams in use", protocol.TRY_LATER))
            return
        self.live += 1
        metrics.STREAMS.inc()
        metrics.STREAMS_OPEN.inc()
        outcome: dict = {"code": protocol.NORMAL}
        try:
            await self._stream(ws, outcome)
        except ProtocolError as err:
            outcome["code"] = err.code
            await _refuse(ws, err)
        except ConnectionClosed as err:  # the client went away; its stream is dropped
            outcome["code"] = "disconnected" if isinstance(err, ConnectionClosedError) else "closed"
        except Exception as err:  # a bug or a model failure on this stream only
            log.exception("stream failed", extra={} if self.worker is None else {"worker": self.worker})
            outcome["code"] = protocol.INTERNAL
            await _refuse(ws, ProtocolError(f"internal error: {type(err).__name__}", protocol.INTERNAL))
        finally:
            self.live -= 1
            metrics.STREAMS_OPEN.dec()
            if outcome["code"] not in (protocol.NORMAL, protocol.GOING_AWAY, "closed"):
                metrics.error(outcome["code"])
            heard = outcome["stream"].seconds if "stream" in outcome else 0.0
            self.note("stream closed", stream=number, close=outcome["code"], audio_s=round(heard, 3),
                      finals=outcome.get("finals", 0))

    async def _receive(self, ws: ServerConnection) -> str | bytes | None:
        """The next message, or None once the server is stopping; ProtocolError when the client idles."""
        if self.stopping:
            return None
        recv = asyncio.ensure_future(ws.recv())  # cancelling recv loses nothing (websockets' own guarantee)
        done, _ = await asyncio.wait({recv, self._stopped}, timeout=self.limits.idle_timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        if recv in done:
            return recv.result()
        recv.cancel()
        if self.stopping:
            return None
        raise ProtocolError(f"idle: no message for {self.limits.idle_timeout:g} s", protocol.POLICY)

    async def _stream(self, ws: ServerConnection, outcome: dict) -> None:
        """Messages until the end message (or `stop`); `outcome` collects what the closing log line says."""
        stream, buffer, first = self.engine.open(), AudioBuffer(self.limits.chunk_samples), True
        outcome.update(stream=stream, finals=0)

        async def run_steps(since: float) -> None:
            """Every step the audio received so far allows (`AudioBuffer.next`), its events sent."""
            while (step := buffer.next(self.engine.recognition.due(stream))) is not None:
                for emission in await self.engine.step(stream, *step):
                    await ws.send(json.dumps(emission.to_json()))
                    outcome["finals"] += emission.is_final
                metrics.LATENCY.observe(time.perf_counter() - since)

        while True:
            message = await self._receive(ws)
            arrived = time.perf_counter()
            if message is None:  # the server is stopping: end the stream as if the client had
                code, reason = protocol.GOING_AWAY, "server stopping"
                break
            if isinstance(message, str):
                parsed = protocol.parse_text(message, first)
                if isinstance(parsed, Start):
                    buffer = AudioBuffer(self.limits.chunk_samples, parsed.sample_rate)
                    if parsed.hotwords or parsed.spoken_form:
                        stream = outcome["stream"] = self.engine.open(parsed.hotwords, parsed.spoken_form)
                elif isinstance(parsed, End):
                    code, reason = protocol.NORMAL, "end of stream"
                    break
            else:
                buffer.push(protocol.pcm16(message, self.limits.max_message))
                await run_steps(arrived)
            first = False
        buffer.end()
        await run_steps(arrived)
        for emission in await self.engine.finish(stream):
            await ws.send(json.dumps(emission.to_json()))
            outcome["finals"] += emission.is_final
        outcome["code"] = code
        await ws.close(code, reason)


async def _refuse(ws: ServerConnection, err: ProtocolError) -> None:
    """Error event, then close with the error's code (a reason of at most 123 bytes)."""
    try:
        await ws.send(err.event())
        await ws.close(err.code, str(err).encode()[:120].decode(errors="ignore"))
    except ConnectionClosed:
        pass


async def start(app: App, host: str = "127.0.0.1", port: int = 8765, reuse_port: bool = False) -> Server:
    """Listen; the returned server's `sockets` tell the port (port 0 picks a free one). `reuse_port`:
    share the port with other processes that listen on it the same way (SO_REUSEPORT; Linux spreads
    the connections over them)."""
    return await serve(app.handle, host, port, process_request=app.process_request,
                       process_response=app.process_response, max_size=4 * app.limits.max_message, max_queue=8,
                       compression=None, ping_interval=20, ping_timeout=20, reuse_port=reuse_port)
