"""The HTTP and WebSocket app: the page at GET /, the recognizer at ws://HOST:PORT/asr (see `protocol`),
/healthz, /metrics, and the OpenAI-compatible POST /v1/audio/transcriptions and GET /v1/models (`openai_api`).

Built on `aiohttp.web`: one handler per route, and `handle` runs one stream per WebSocket connection. A
stream that breaks the protocol, idles, or vanishes gets an error event and a close code (when it can
still hear one); the others go on untouched. `stop` ends every open stream as if its client had sent
the end message: its last final(s), then close code 1001.
"""
from __future__ import annotations

import asyncio
import hmac
import json
import logging
import socket
import time
from dataclasses import dataclass
from importlib import resources
from typing import Awaitable, Callable

from aiohttp import WSMsgType, web

from asr.server import metrics, openai_api, protocol
from asr.server.engine import Engine
from asr.server.listen import listen
from asr.server.protocol import End, ProtocolError, Start
from asr.server.session import AudioBuffer, stepped
from asr.server.uploads import Uploads

log = logging.getLogger("asr.serve")
PAGES = {"/": ("index.html", "text/html; charset=utf-8"), "/app.js": ("app.js", "text/javascript"),
         "/worklet.js": ("worklet.js", "text/javascript")}
BACKLOG = 100  # pending connections per listening socket (asyncio's default)
PING_INTERVAL = 20.0  # seconds between WebSocket pings; a client that does not answer is dropped


@dataclass
class Limits:
    max_streams: int = 64
    max_message: int = 256 * 1024  # bytes per audio message (8 s at 16 kHz)
    idle_timeout: float = 30.0  # seconds without a message
    chunk_samples: int = 8000  # 500 ms at 16 kHz: one partial per chunk, as in asr.stream
    token: str | None = None
    max_upload: int = 25 * 1024 * 1024  # bytes of one POST /v1/audio/transcriptions file (OpenAI's own limit)


class _Gone(Exception):
    """The client closed the stream (`clean`: with a close frame of 1000 or 1001) or vanished."""

    def __init__(self, clean: bool):
        super().__init__("closed" if clean else "disconnected")
        self.clean = clean


class App:
    """Serves the page, the /asr streams and the uploads of one `Engine`; `worker` numbers this process
    among several; `model` names the model (GET /v1/models, as Wyoming's describe does)."""

    def __init__(self, engine: Engine, limits: Limits | None = None, worker: int | None = None,
                 model: str = "asr-default"):
        self.engine, self.limits, self.worker, self.model = engine, limits or Limits(), worker, model
        self.started = int(time.time())
        self.live = 0  # streams open now
        self.served = 0  # connections handled so far
        self.stopping = False
        self._stopped: asyncio.Future | None = None  # done once `stop` is called (made in the serving loop)
        self.uploads = Uploads(engine)  # POST /v1/audio/transcriptions: whole files, beside the streams
        self._openai = openai_api.Endpoint(self)

    def stop(self) -> None:
        """Stop: every open stream ends with its final(s) at its next message wait; /healthz says 503."""
        self.stopping = True
        if self._stopped is not None and not self._stopped.done():
            self._stopped.set_result(None)

    def note(self, message: str, **fields) -> None:
        """An INFO line in the log, with this worker's number among its fields."""
        log.info(message, extra=fields if self.worker is None else {"worker": self.worker, **fields})

    def authorised(self, request: web.Request) -> bool:
        """Whether the request carries the token (?token= or 'Authorization: Bearer'), if one is set."""
        if self.limits.token is None:
            return True
        given = request.query.get("token", "")
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            given = given or auth[len("Bearer "):]
        return hmac.compare_digest(given.encode(), self.limits.token.encode())

    def web_app(self) -> web.Application:
        """The aiohttp application: every route, and the X-ASR-Worker header on every response."""
        application = web.Application(middlewares=[_not_found, openai_api.error_middleware])
        for path in PAGES:
            application.router.add_get(path, self._page)
        application.router.add_get("/healthz", self._healthz)
        application.router.add_get("/metrics", self._metrics)
        application.router.add_get("/asr", self.handle)
        application.router.add_post(openai_api.PATH, self._openai.handle)
        application.router.add_get(openai_api.MODELS, self._openai.models)
        application.on_response_prepare.append(self._name_worker)
        return application

    async def _name_worker(self, request: web.Request, response: web.StreamResponse) -> None:
        if self.worker is not None:
            response.headers["X-ASR-Worker"] = str(self.worker)

    async def _page(self, request: web.Request) -> web.Response:
        name, kind = PAGES[request.path]
        body = resources.files("asr.server.web").joinpath(name).read_bytes()
        return web.Response(body=body, headers={"Content-Type": kind, "Cache-Control": "no-store",
                                                "X-Content-Type-Options": "nosniff"})

    async def _healthz(self, request: web.Request) -> web.Response:
        """200 once the model is loaded (it is before the server listens), 503 while stopping."""
        if self.stopping:
            return _plain(503, b"stopping\n", "text/plain")
        return _plain(200, b"ok\n", "text/plain")

    async def _metrics(self, request: web.Request) -> web.Response:
        return _plain(200, *metrics.exposition())

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """GET /asr: one stream, start to close; never raises once the handshake is done."""
        if request.headers.get("Upgrade", "").lower() != "websocket":
            return _plain(426, b"/asr is a WebSocket: connect with a WebSocket client\n", "text/plain")
        if not self.authorised(request):
            metrics.error("unauthorized")
            return _plain(401, b"missing or wrong token\n", "text/plain")
        ws = web.WebSocketResponse(max_msg_size=4 * self.limits.max_message, heartbeat=PING_INTERVAL,
                                   compress=False, autoclose=True)
        await ws.prepare(request)
        self.served += 1
        number = self.served
        if self._stopped is None:
            self._stopped = asyncio.get_running_loop().create_future()
            if self.stopping:
                self._stopped.set_result(None)
        if self.live >= self.limits.max_streams:
            metrics.error(protocol.TRY_LATER)
            await _refuse(ws, ProtocolError(f"server busy: all {self.limits.max_streams} streams in use", protocol.TRY_LATER))
            return ws
        self.live += 1
        metrics.STREAMS.inc()
        metrics.STREAMS_OPEN.inc()
        outcome: dict = {"code": protocol.NORMAL}
        try:
            await self._stream(ws, outcome)
        except ProtocolError as err:
            outcome["code"] = err.code
            await _refuse(ws, err)
        except _Gone as err:  # the client went away; its stream is dropped
            outcome["code"] = str(err)
        except ConnectionError:  # the client vanished while the server was sending
            outcome["code"] = "disconnected"
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
        return ws

    async def _receive(self, ws: web.WebSocketResponse) -> str | bytes | None:
        """The next message, or None once the server is stopping; ProtocolError when the client idles,
        _Gone when it closed or vanished."""
        if self.stopping:
            return None
        recv = asyncio.ensure_future(ws.receive())  # cancelling a waiting receive loses nothing: no frame was taken
        done, _ = await asyncio.wait({recv, self._stopped}, timeout=self.limits.idle_timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        if recv not in done:
            recv.cancel()
            if self.stopping:
                return None
            raise ProtocolError(f"idle: no message for {self.limits.idle_timeout:g} s", protocol.POLICY)
        message = recv.result()
        if message.type in (WSMsgType.TEXT, WSMsgType.BINARY):
            return message.data
        if message.type == WSMsgType.ERROR and getattr(message.data, "code", None) == protocol.TOO_BIG:
            raise _Gone(False)  # aiohttp has already closed it with 1009 (a message over 4 x --max-message)
        raise _Gone(message.type == WSMsgType.CLOSE and message.data in (protocol.NORMAL, protocol.GOING_AWAY))

    async def _stream(self, ws: web.WebSocketResponse, outcome: dict) -> None:
        """Messages until the end message (or `stop`); `outcome` collects what the closing log line says."""
        stream, buffer, first = self.engine.open(), AudioBuffer(self.limits.chunk_samples), True
        outcome.update(stream=stream, finals=0)

        async def run_steps(since: float) -> None:
            """Every step the audio received so far allows (`session.stepped`), its events sent."""
            async for emission in stepped(self.engine, stream, buffer, since):
                await ws.send_str(json.dumps(emission.to_json()))
                outcome["finals"] += emission.is_final

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
            await ws.send_str(json.dumps(emission.to_json()))
            outcome["finals"] += emission.is_final
        outcome["code"] = code
        await ws.close(code=code, message=reason.encode())


@web.middleware
async def _not_found(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                     ) -> web.StreamResponse:
    """A 404 that says where things are (under /v1/, `openai_api` answers in OpenAI's shape)."""
    try:
        return await handler(request)
    except web.HTTPNotFound:
        return _plain(404, b"not found: the page is at /, the socket at /asr, uploads at POST " + openai_api.PATH.encode()
                      + b"\n", "text/plain")


def _plain(status: int, body: bytes, kind: str) -> web.Response:
    return web.Response(status=status, body=body, headers={"Content-Type": kind, "Cache-Control": "no-store"})


async def _refuse(ws: web.WebSocketResponse, err: ProtocolError) -> None:
    """Error event, then close with the error's code (a reason of at most 123 bytes)."""
    try:
        await ws.send_str(err.event())
        await ws.close(code=err.code, message=str(err).encode()[:120].decode(errors="ignore").encode())
    except ConnectionError:
        pass


class Server:
    """The listening sockets of a started app: `sockets` tell the port; `close` stops listening (and, with
    `close_connections`, stops the app: every stream gets its finals and 1001); `wait_closed` returns
    once every connection's handler is done."""

    def __init__(self, app: App, runner: web.AppRunner, sockets: list[socket.socket]):
        self.app, self.runner, self.sockets = app, runner, sockets
        self._closing: asyncio.Future | None = None

    def close(self, close_connections: bool = True) -> None:
        if close_connections:
            self.app.stop()
        if self._closing is None:  # aiohttp's cleanup stops listening at once, then waits for the handlers
            self._closing = asyncio.ensure_future(self.runner.cleanup())

    async def wait_closed(self) -> None:
        if self._closing is None:
            self.close(close_connections=False)
        await asyncio.shield(self._closing)
        self.app.uploads.close()


async def start(app: App, host: str = "127.0.0.1", port: int = 8765, reuse_port: bool = False) -> Server:
    """Listen; the returned server's `sockets` tell the port (port 0 picks a free one). `reuse_port`:
    share the port with other processes that listen on it the same way (SO_REUSEPORT; Linux spreads
    the connections over them)."""
    sockets = listen(host, port, reuse_port, BACKLOG)
    runner = web.AppRunner(app.web_app(), handle_signals=False, access_log=None, shutdown_timeout=3600.0)
    try:
        await runner.setup()
        for sock in sockets:
            await web.SockSite(runner, sock).start()
    except BaseException:
        await runner.cleanup()
        for sock in sockets:
            sock.close()
        raise
    return Server(app, runner, sockets)
