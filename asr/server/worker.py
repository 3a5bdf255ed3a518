"""One serving process: load the model, listen, serve until told to stop, then stop gracefully.

`asr.serve` runs this in its own process with `--workers 1`, and in each of N spawned processes
otherwise (`asr.server.supervisor`), all listening on one port with SO_REUSEPORT. On SIGTERM or
SIGINT a worker stops accepting, ends every open stream with its final(s) (close code 1001) and
returns once every stream is done (or `STOP_TIMEOUT` has passed).
"""
from __future__ import annotations

import argparse
import asyncio
import ctypes
import logging
import signal
import sys
import time
from multiprocessing.connection import Connection
from typing import Callable

from asr import cli
from asr.audio import SAMPLE_RATE
from asr.decoding.beam import LMError
from asr.model.errors import ModelError
from asr.server import logs, metrics, wyoming
from asr.server.app import App, Limits, start
from asr.server.engine import Engine
from asr.server.recognition import Recognition

log = logging.getLogger("asr.serve")
STOP_TIMEOUT = 30.0  # seconds the open streams get to finish after SIGTERM
RSS_EVERY = 10.0  # seconds between updates of this worker's RSS gauge
LOAD_ERRORS = (ModelError, LMError, OSError, ValueError)


def build_app(args: argparse.Namespace, worker: int | None = None) -> App:
    """The app the options describe, its model loaded (raises one of LOAD_ERRORS with a one-line reason)."""
    endpoint = cli.endpoint_config(args).validate()
    recognizer = cli.load_recognizer(args)
    limits = Limits(max_streams=args.max_streams, max_message=args.max_message, idle_timeout=args.idle_timeout,
                    chunk_samples=SAMPLE_RATE // 2, token=args.token, max_upload=round(args.max_upload * 2**20))
    recognizer.check_chunk_ms(1000 * limits.chunk_samples / SAMPLE_RATE)  # a lookahead model's chunk fits the served one
    decoder = cli.load_decoder(args, recognizer)
    release_free_heap()
    return App(Engine(Recognition(recognizer, decoder, endpoint), max_batch=args.max_batch,
                          batch_wait=args.batch_wait / 1000), limits, worker,
               wyoming.model_name(args.model, args.onnx_dir, args.int8))


async def serve(app: App, host: str, port: int, reuse_port: bool, listening: Callable[[int], None],
                wyoming_at: wyoming.Service | None = None) -> bool:
    """Serve until SIGTERM/SIGINT, then stop gracefully; `listening(port)` is called once the socket is up
    (and the Wyoming one, if `wyoming_at`). True when every open stream finished within STOP_TIMEOUT."""
    server = await start(app, host, port, reuse_port)
    wyoming_server = await wyoming.start(app, wyoming_at) if wyoming_at is not None else None
    listening(server.sockets[0].getsockname()[1])
    loop = asyncio.get_running_loop()
    stop = loop.create_future()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))

    async def report_rss() -> None:
        while True:
            metrics.RSS.set(metrics.resident_bytes())
            await asyncio.sleep(RSS_EVERY)
    rss = loop.create_task(report_rss())
    await stop
    rss.cancel()
    app.note("stopping: no new streams; finishing the open ones", open=app.live)
    app.stop()
    wyoming_closed = wyoming_server.stop(STOP_TIMEOUT) if wyoming_server is not None else None
    server.close(close_connections=False)
    try:
        await asyncio.wait_for(server.wait_closed(), STOP_TIMEOUT)
        finished = True
    except asyncio.TimeoutError:
        log.warning("stop: %d stream(s) still open after %g s; dropping them", app.live, STOP_TIMEOUT)
        finished = False
    if wyoming_closed is not None and not await wyoming_closed:
        log.warning("stop: Wyoming stream(s) still open after %g s; dropped them", STOP_TIMEOUT)
        finished = False
    app.engine.close()
    app.note("stopped", streams=app.served)
    return finished


def release_free_heap() -> None:
    """Give the heap's free pages back to the system: glibc keeps what loading freed (the lexicon's arrays and
    lists, the graph's protobuf), 5-6 MB a worker that would otherwise stay resident for its whole life."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


def run_worker(args: argparse.Namespace, index: int, port: int, conn: Connection) -> None:
    """A spawned worker's body: tells the supervisor ("ready", (when it began, when it listened): time.time()) once
    listening, or ("error", reason)."""
    began = time.time()
    logs.setup(args.log_json)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # until the loop handles it: Ctrl-C reaches every worker
    try:
        app = build_app(args, index)
    except LOAD_ERRORS as err:
        conn.send(("error", str(err)))
        sys.exit(1)
    try:
        clean = asyncio.run(serve(app, args.host, port, True,
                                  lambda _: conn.send(("ready", (began, time.time()))), args.wyoming))
    except OSError as err:
        conn.send(("error", f"cannot listen on {args.host}:{port}: {err.strerror or err}"))
        sys.exit(1)
    sys.exit(0 if clean else 1)
