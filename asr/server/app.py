"""The WebSocket app: the page at GET /, the recognizer at ws://HOST:PORT/asr (see `protocol`).

Built on `websockets.asyncio.server`: `process_request` answers plain HTTP (the page, 401, 404)
before any handshake, and `handle` runs one stream per connection. A stream that breaks the
protocol, idles, or vanishes gets an error event and a close code (when it can still hear one);
the others go on untouched.
"""
from __future__ import annotations

import asyncio
import hmac
import json
import logging
from dataclasses import dataclass
from http import HTTPStatus
from importlib import resources
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from asr.endpoint import Emission
from asr.server import protocol
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
    """Serves the page and the /asr streams of one `Engine`."""

    def __init__(self, engine: Engine, limits: Limits | None = None):
        self.engine, self.limits = engine, limits or Limits()
        self.live = 0  # streams open now
        self.served = 0  # connections handled so far

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
        if path in PAGES and "websocket" not in request.headers.get("Upgrade", "").lower():
            return self._page(path)
        if path != "/asr":
            return connection.respond(HTTPStatus.NOT_FOUND, "not found: the page is at / and the socket at /asr\n")
        if not self._authorised(request):
            return connection.respond(HTTPStatus.UNAUTHORIZED, "missing or wrong token\n")
        return None

    async def handle(self, ws: ServerConnection) -> None:
        """One stream, start to close; never raises."""
        self.served += 1
        if self.live >= self.limits.max_streams:
            await _refuse(ws, ProtocolError(f"server busy: all {self.limits.max_streams} streams in use", protocol.TRY_LATER))
            return
        self.live += 1
        try:
            await self._stream(ws)
        except ProtocolError as err:
            await _refuse(ws, err)
        except ConnectionClosed:
            pass  # the client went away; its stream is dropped
        except Exception as err:  # a bug or a model failure on this stream only
            log.exception("stream failed")
            await _refuse(ws, ProtocolError(f"internal error: {type(err).__name__}", protocol.INTERNAL))
        finally:
            self.live -= 1

    async def _stream(self, ws: ServerConnection) -> None:
        stream, buffer, first = self.engine.open(), AudioBuffer(self.limits.chunk_samples), True
        while True:
            try:
                message = await asyncio.wait_for(ws.recv(), self.limits.idle_timeout)
            except asyncio.TimeoutError:  # the builtin TimeoutError from Python 3.11
                raise ProtocolError(f"idle: no message for {self.limits.idle_timeout:g} s", protocol.POLICY) from None
            if isinstance(message, str):
                parsed = protocol.parse_text(message, first)
                if isinstance(parsed, Start):
                    buffer = AudioBuffer(self.limits.chunk_samples, parsed.sample_rate)
                    if parsed.hotwords:
                        stream = self.engine.open(parsed.hotwords)
                elif isinstance(parsed, End):
                    for chunk in buffer.flush():
                        await _send(ws, await self.engine.step(stream, chunk))
                    await _send(ws, await self.engine.finish(stream))
                    await ws.close(protocol.NORMAL, "end of stream")
                    return
            else:
                for chunk in buffer.push(protocol.pcm16(message, self.limits.max_message)):
                    await _send(ws, await self.engine.step(stream, chunk))
            first = False


async def _send(ws: ServerConnection, emissions: list[Emission]) -> None:
    for emission in emissions:
        await ws.send(json.dumps(emission.to_json()))


async def _refuse(ws: ServerConnection, err: ProtocolError) -> None:
    """Error event, then close with the error's code (a reason of at most 123 bytes)."""
    try:
        await ws.send(err.event())
        await ws.close(err.code, str(err).encode()[:120].decode(errors="ignore"))
    except ConnectionClosed:
        pass


async def start(app: App, host: str = "127.0.0.1", port: int = 8765) -> Server:
    """Listen; the returned server's `sockets` tell the port (port 0 picks a free one)."""
    return await serve(app.handle, host, port, process_request=app.process_request,
                       max_size=4 * app.limits.max_message, max_queue=8, compression=None, ping_interval=20,
                       ping_timeout=20)
