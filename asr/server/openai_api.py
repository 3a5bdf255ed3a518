"""POST /v1/audio/transcriptions: OpenAI's transcription endpoint, for the clients that already speak it; and
GET /v1/models, which lists the one model served in OpenAI's list shape (clients call it to check the server).

    curl http://127.0.0.1:8765/v1/audio/transcriptions -F file=@talk.m4a -F response_format=srt

A multipart form: `file` (any audio or video `asr.transcribe` reads), `model` (accepted, whatever it
names: one model is served), `language` (English or nothing), `prompt` (hotwords: phrases separated by
commas or new lines, each as a line of a --hotwords file), `response_format` (json, text, srt, vtt,
verbose_json), `timestamp_granularities[]` (segment, word: verbose_json's segments and words),
`stream` (true: server-sent `transcript.text.delta` events, one per final, then `transcript.text.done`; between
them `transcript.text.partial` events with the unfinished segment's text).
The text is `asr.transcribe`'s for the same file with the server's decoding options. Errors are
OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, with 400, 401, 404, 405, 413, 415,
429, 500 or 503; a client gone before its answer is counted as 499. The token (--token) is the API key
(`Authorization: Bearer`). `uploads` runs the work.
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable, Protocol

from aiohttp import web

from asr.audio import AudioError
from asr.audio.files import AUDIO_SUFFIXES, audio_duration
from asr.decoding.decoder import Decoder
from asr.decoding.endpoint import Emission
from asr.decoding.hotwords import parse_hotwords
from asr.server import metrics
from asr.server.engine import Engine
from asr.server.openai_formats import FORMATS, GRANULARITIES, render
from asr.server.uploads import Abandoned, Busy, Uploads
from asr.text.formats import Transcript

log = logging.getLogger("asr.serve")
PATH = "/v1/audio/transcriptions"
MODELS = "/v1/models"
FIELD_LIMIT = 64 * 1024  # bytes of any form field but the file
ENGLISH = re.compile(r"(en|eng|english)([-_][a-z0-9]+)*", re.IGNORECASE)


class ApiError(Exception):
    """A request refused with `status`, in OpenAI's error shape."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.param, self.code, self.kind = status, param, code, kind

    def body(self) -> dict:
        return {"error": {"message": str(self), "type": self.kind, "param": self.param, "code": self.code}}

    def response(self) -> web.Response:
        return web.json_response(self.body(), status=self.status)


@web.middleware
async def error_middleware(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                           ) -> web.StreamResponse:
    """Under /v1/: every refusal in OpenAI's error shape (a wrong path 404, a wrong method 405 too)."""
    if not request.path.startswith("/v1/"):
        return await handler(request)
    try:
        return await handler(request)
    except ApiError as err:
        metrics.UPLOADS.labels(str(err.status)).inc()
        return err.response()
    except (Abandoned, ConnectionError):  # the client went away while sending the file or awaiting the answer
        dropped(request)
        return web.Response(status=499)
    except web.HTTPException as err:
        if err.status < 400:
            raise
        where = (f"{request.path} takes {'GET' if request.path == MODELS else 'POST'} only" if err.status == 405
                 else f"the endpoints under /v1/ are POST {PATH} and GET {MODELS}")
        return ApiError(err.status, f"{err.reason}: {request.method} {request.path} ({where})", None,
                        "method_not_allowed" if err.status == 405 else "unknown_url").response()
    except Exception as err:  # a bug or a model failure on this request only
        log.exception("upload failed")
        metrics.UPLOADS.labels("500").inc()
        return ApiError(500, f"internal error: {type(err).__name__}", None, "internal_error", "server_error").response()


@dataclass
class Form:
    """The request's fields; `file` is the upload spooled to disk."""
    file: Path | None = None
    filename: str = "file"
    language: str = ""
    prompt: str = ""
    response_format: str = "json"
    stream: bool = False
    granularities: list[str] = field(default_factory=list)


async def read_form(request: web.Request, folder: Path, max_upload: int) -> Form:
    """The multipart form, its file written into `folder` (ApiError 413 once it passes `max_upload` bytes)."""
    if request.content_type != "multipart/form-data":
        raise ApiError(415, f"the body must be multipart/form-data with the audio in `file` (got "
                            f"{request.content_type or 'no Content-Type'})", None, "unsupported_media_type")
    if request.content_length is not None and request.content_length > max_upload + FIELD_LIMIT:
        raise _too_big(max_upload)
    form = Form()
    try:
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if part.name == "file":
                form.filename = Path(part.filename or "file").name
                suffix = Path(form.filename).suffix.lower()
                form.file = folder / ("upload" + (suffix if suffix in AUDIO_SUFFIXES else ""))
                size = 0
                with open(form.file, "wb") as out:
                    while chunk := await part.read_chunk(1 << 16):
                        size += len(chunk)
                        if size > max_upload:
                            raise _too_big(max_upload)
                        out.write(chunk)
                continue
            value = bytearray()
            while chunk := await part.read_chunk(1 << 14):
                value += chunk
                if len(value) > FIELD_LIMIT:
                    raise ApiError(400, f"the field {part.name!r} is over {FIELD_LIMIT} bytes", part.name)
            _set_field(form, part.name or "", value.decode("utf-8", errors="replace").strip())
    except (ValueError, AssertionError, UnicodeDecodeError) as err:  # aiohttp's words for a broken form
        raise ApiError(400, f"malformed multipart body: {err}") from None
    return form


def _too_big(limit: int) -> ApiError:
    return ApiError(413, f"the file is over the server's upload limit of {limit / 2**20:g} MB (--max-upload)",
                    "file", "file_too_large")


def _set_field(form: Form, name: str, value: str) -> None:
    """One text field into `form`; ApiError for a value the endpoint cannot honour."""
    if name == "language":
        if value and not ENGLISH.fullmatch(value):
            raise ApiError(400, f"language {value!r} is not served: this model transcribes English only (en)",
                           "language", "unsupported_language")
        form.language = value
    elif name == "prompt":
        form.prompt = value
    elif name == "response_format":
        if value not in FORMATS:
            raise ApiError(400, f"response_format {value!r} is not one of {', '.join(FORMATS)}", "response_format",
                           "invalid_value")
        form.response_format = value
    elif name == "stream":
        if value.lower() not in ("true", "false", "1", "0", ""):
            raise ApiError(400, f"stream must be true or false (got {value!r})", "stream", "invalid_value")
        form.stream = value.lower() in ("true", "1")
    elif name in ("timestamp_granularities[]", "timestamp_granularities"):
        if value not in GRANULARITIES:
            raise ApiError(400, f"timestamp_granularities: {value!r} is not one of {', '.join(GRANULARITIES)}",
                           "timestamp_granularities", "invalid_value")
        form.granularities.append(value)


class UploadLimit(Protocol):
    """The one limit the endpoint reads (of `asr.server.app.Limits`)."""

    max_upload: int  # bytes of one uploaded file


class Server(Protocol):
    """What the endpoint reads of the server that mounts it: `asr.server.app.App`, which imports this module."""

    engine: Engine
    uploads: Uploads
    limits: UploadLimit
    stopping: bool  # shutting down: new requests get 503
    model: str  # the served model's name
    started: int  # when the server started (Unix seconds)

    def authorised(self, request: web.Request) -> bool:
        """Whether the request carries the server's token (or none is needed)."""


class Endpoint:
    """The handler of POST /v1/audio/transcriptions for one `App` (its token, limits, engine, uploads)."""

    def __init__(self, app: Server):
        self.app = app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """One request, start to answer; refusals are raised as ApiError (`error_middleware` answers them)."""
        if not self.app.authorised(request):
            metrics.error("unauthorized")
            raise ApiError(401, "missing or wrong API key: give the server's --token as the key "
                                "(Authorization: Bearer)", None, "invalid_api_key")
        if self.app.stopping:
            raise ApiError(503, "the server is stopping", None, "unavailable", "server_error")
        with tempfile.TemporaryDirectory(prefix="asr-upload-") as folder:
            form = await read_form(request, Path(folder), self.app.limits.max_upload)
            if form.file is None:
                raise ApiError(400, "no file: send the audio as the form field `file`", "file", "missing_file")
            if form.stream and form.response_format not in ("json", "text"):
                raise ApiError(400, "stream=true sends text events: response_format must be json or text",
                               "response_format", "invalid_value")
            decoder = self._decoder(form.prompt)
            await self._probe(form)
            if form.stream:
                return await self._stream(request, form, decoder)
            transcript = await self._transcribe(form, decoder, gone=lambda: _gone(request))
        metrics.UPLOADS.labels("200").inc()
        return render(transcript, form.response_format, form.granularities)

    async def models(self, request: web.Request) -> web.Response:
        """GET /v1/models: OpenAI's list shape with the one model served (any `model` a request names is
        transcribed by it). `created` is when the server started."""
        if not self.app.authorised(request):
            metrics.error("unauthorized")
            return ApiError(401, "missing or wrong API key: give the server's --token as the key "
                                 "(Authorization: Bearer)", None, "invalid_api_key").response()
        return web.json_response({"object": "list", "data": [
            {"id": self.app.model, "object": "model", "created": self.app.started, "owned_by": "asr"}]})

    def _decoder(self, prompt: str) -> Decoder:
        """The server's decoder, favouring the prompt's phrases (as hotwords) if there are any."""
        decoder = self.app.engine.recognition.decoder
        lines = [line.strip() for line in re.split(r"[,;\n]", prompt) if line.strip()]
        if not lines:
            return decoder
        try:
            return decoder.with_hotwords(parse_hotwords(lines, "prompt", self.app.engine.recognition.recognizer.tokenizer))
        except ValueError as err:  # HotwordError names the phrase; a greedy server takes no hotwords
            raise ApiError(400, str(err), "prompt", "invalid_value") from None

    async def _probe(self, form: Form) -> None:
        """ApiError 400 at once for a file that is empty or not audio (its header is read, not its samples; the
        reasons are asr.audio's, as every tool gives them)."""
        try:
            seconds = await asyncio.get_running_loop().run_in_executor(None, audio_duration, form.file)
        except AudioError as err:
            raise self._bad_file(form, err) from None
        if seconds <= 0:
            raise ApiError(400, f"{form.filename}: contains no audio samples", "file", "invalid_file")

    def _bad_file(self, form: Form, err: Exception) -> ApiError:
        return ApiError(400, str(err).replace(str(form.file), form.filename), "file", "invalid_file")

    async def _transcribe(self, form: Form, decoder: Decoder, on_emission: Callable[[Emission], None] | None = None,
                          gone: Callable[[], bool] | None = None) -> Transcript:
        try:
            transcript = await self.app.uploads.transcribe(form.file, decoder, on_emission, gone)
        except Busy as err:
            raise ApiError(429, str(err), None, "server_busy", "rate_limit_error") from None
        except AudioError as err:
            raise self._bad_file(form, err) from None
        transcript.audio = form.filename
        return transcript

    async def _stream(self, request: web.Request, form: Form, decoder: Decoder) -> web.StreamResponse:
        """Server-sent events: a `transcript.text.delta` per final as it is recognised, then `transcript.text.done`
        (the deltas add up to its text). OpenAI's deltas only ever append, so the partials, which may still
        change, come as events of their own, `transcript.text.partial` {text: the segment so far}, that
        OpenAI's clients pass over unless asked for. A failure after the first event comes as an error event."""
        loop, finals = asyncio.get_running_loop(), asyncio.Queue()
        work = asyncio.ensure_future(self._transcribe(form, decoder, lambda e: loop.call_soon_threadsafe(finals.put_nowait, e),
                                                      lambda: _gone(request)))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"})
        first = True
        try:
            while not (work.done() and finals.empty()):
                getter = asyncio.ensure_future(finals.get())
                await asyncio.wait({getter, work}, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    getter.cancel()
                    continue
                if not response.prepared:
                    await response.prepare(request)
                emission = getter.result()
                if not emission.is_final:
                    await _event(response, {"type": "transcript.text.partial", "text": emission.text})
                    continue
                await _event(response, {"type": "transcript.text.delta", "delta": ("" if first else " ") + emission.text})
                first = False
            transcript = work.result()
        except (Abandoned, ConnectionError):  # the client went away: nobody hears an error event
            if not response.prepared:
                raise
            dropped(request)
            return response
        except Exception as err:  # after the first event, a failure can only be an event itself
            if not response.prepared:
                raise
            if not isinstance(err, ApiError):
                log.exception("upload failed")
                err = ApiError(500, f"internal error: {type(err).__name__}", None, "internal_error", "server_error")
            metrics.UPLOADS.labels(str(err.status)).inc()
            await _event(response, err.body())
            return response
        finally:
            work.cancel()  # the client went away (or the work is done): nothing is lost
        if not response.prepared:
            await response.prepare(request)
        await _event(response, {"type": "transcript.text.done", "text": transcript.text})
        metrics.UPLOADS.labels("200").inc()
        return response


def dropped(request: web.Request) -> None:
    """Count and log (one line) a request whose client went away before its answer: 499, nginx's "client closed
    request", never a 5xx; nothing is lost but an answer nobody waits for."""
    metrics.UPLOADS.labels("499").inc()
    log.info("upload dropped: the client went away", extra={"status": 499, "path": request.path})


def _gone(request: web.Request) -> bool:
    """Whether the client has closed its connection (asked from the upload thread: a plain read)."""
    transport = request.transport
    return transport is None or transport.is_closing()


async def _event(response: web.StreamResponse, data: dict) -> None:
    await response.write(f"data: {json.dumps(data)}\n\n".encode())
