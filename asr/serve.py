"""Serve the recognizer over WebSocket, with a page that transcribes the microphone live.

    python -m asr.serve [--host 127.0.0.1] [--port 8765] [--model PATH] [--greedy] [--max-streams N] [--token SECRET]

Open http://HOST:PORT/ in a browser, or stream from any client to ws://HOST:PORT/asr: an optional
first text message {"sample_rate": N}, then binary little-endian int16 mono PCM, then {"type": "end"}.
The server answers with the JSON objects of `asr.stream --json` (a partial every 500 ms of audio,
finals at endpoints) and closes with 1000 after the last final. All live streams share one model:
their ready chunks go through the encoder as one batch.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys

from asr import cli
from asr.audio import SAMPLE_RATE
from asr.decoding.beam import LMError
from asr.model.backend import ModelError
from asr.server.app import App, Limits, start
from asr.server.engine import Engine
from asr.server.recognition import Recognition


def _parser() -> argparse.ArgumentParser:
    parser = cli.new_parser("asr.serve", __doc__)
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=8765, help="TCP port (default 8765; 0 picks a free one)")
    parser.add_argument("--max-streams", type=int, default=64, help="concurrent streams; more are closed with 1013")
    parser.add_argument("--token", default=os.environ.get("ASR_SERVE_TOKEN"),
                        help="require this secret (?token= or 'Authorization: Bearer'); default $ASR_SERVE_TOKEN")
    parser.add_argument("--idle-timeout", type=float, default=30.0, help="close a stream silent this many seconds")
    parser.add_argument("--max-message", type=int, default=256 * 1024, help="largest audio message in bytes")
    parser.add_argument("--max-batch", type=int, default=64, help="most chunks in one encoder pass")
    cli.add_model_args(parser)
    cli.add_decoder_args(parser)
    cli.add_endpoint_args(parser)
    return parser


async def _serve(app: App, host: str, port: int) -> None:
    server = await start(app, host, port)
    bound = server.sockets[0].getsockname()[1]
    print(f"asr.serve: listening on http://{host}:{bound}/ (stream to ws://{host}:{bound}/asr); Ctrl-C to stop",
          file=sys.stderr, flush=True)
    if host not in ("127.0.0.1", "localhost", "::1") and app.limits.token is None:
        print("asr.serve: warning: listening beyond this machine without --token: anyone who can reach the port "
              "can use it", file=sys.stderr, flush=True)
    stop = asyncio.get_running_loop().create_future()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
    await stop
    server.close()
    await server.wait_closed()
    app.engine.close()


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    for name, low in (("port", 0), ("max_streams", 1), ("max_message", 2), ("max_batch", 1)):
        if getattr(args, name) < low:
            parser.error(f"--{name.replace('_', '-')} must be >= {low} (got {getattr(args, name)})")
    if args.port > 65535:
        parser.error(f"--port must be <= 65535 (got {args.port})")
    if args.idle_timeout <= 0:
        parser.error(f"--idle-timeout must be > 0 (got {args.idle_timeout})")
    if args.token is not None and not args.token:
        parser.error("--token must not be empty")
    try:
        endpoint = cli.endpoint_config(args).validate()
        recognizer = cli.load_recognizer(args)
        decoder = cli.load_decoder(args, recognizer)
    except (ModelError, LMError, OSError, ValueError) as err:
        cli.error("serve", err)
        return 1
    limits = Limits(max_streams=args.max_streams, max_message=args.max_message, idle_timeout=args.idle_timeout,
                    chunk_samples=SAMPLE_RATE // 2, token=args.token)
    app = App(Engine(Recognition(recognizer, decoder, endpoint), max_batch=args.max_batch), limits)
    try:
        asyncio.run(_serve(app, args.host, args.port))
    except OSError as err:  # the port is taken, the host unknown
        cli.error("serve", f"cannot listen on {args.host}:{args.port}: {err.strerror or err}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
