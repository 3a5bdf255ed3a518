"""Serve the recognizer over WebSocket, with a page that transcribes the microphone live.

    python -m asr.serve [--host 127.0.0.1] [--port 8765] [--workers N] [--model PATH] [--greedy]
                        [--max-streams N] [--token SECRET] [--log-json] [--wyoming tcp://HOST:PORT]

Open http://HOST:PORT/ in a browser, or stream from any client to ws://HOST:PORT/asr: an optional
first text message {"sample_rate": N}, then binary little-endian int16 mono PCM, then {"type": "end"}.
The server answers with the JSON objects of `asr.stream --json` (a partial after a 500 ms chunk where the
text changed, finals at endpoints) and closes with 1000 after the last final. The live streams of one worker
share its model: their ready chunks go through the encoder as one batch. --workers N (default: one per core)
runs N such processes behind the one port, loading side by side; one log line, "ready in S s: listening on
...", says when every one listens. A port that another process already serves is refused, and the files the
options name are checked before anything loads (asr.cli.checks). GET
/healthz answers 200 once the model is loaded (503 while stopping), GET /metrics the Prometheus metrics.
POST /v1/audio/transcriptions transcribes a whole file as OpenAI's endpoint does (asr.server.openai_api).
--wyoming tcp://0.0.0.0:10300 also serves Home Assistant's Wyoming protocol on that port (asr.server.wyoming).
SIGTERM (or Ctrl-C) stops accepting, ends every open stream with its final(s) (close code 1001), then
exits 0.
"""
from __future__ import annotations

import time

STARTED = time.monotonic()  # the command's start, for the time it took to be ready (before the imports below)

import argparse  # noqa: E402
import asyncio  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from contextlib import ExitStack  # noqa: E402
from dataclasses import replace  # noqa: E402

from asr import cli  # noqa: E402
from asr.cli import checks  # noqa: E402
from asr.server import logs, wyoming  # noqa: E402
from asr.server.engine import BATCH_WAIT_MS  # noqa: E402
from asr.server.supervisor import StartError, Supervisor, claim_port, hold_port  # noqa: E402

log = logging.getLogger("asr.serve")


def cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _wyoming_uri(text: str) -> wyoming.Service:
    try:
        return wyoming.parse_uri(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _hold_wyoming(args: argparse.Namespace, held: ExitStack) -> wyoming.Service:
    """Claim --wyoming's port as --port's is claimed, and hold it (bound with SO_REUSEPORT, not listening) while the
    command runs, so that port 0 becomes a free port that every worker then shares: the service, with that port."""
    service = args.wyoming
    held.enter_context(claim_port(service.host, service.port))
    port = held.enter_context(hold_port(service.host, service.port)).getsockname()[1]
    return replace(service, port=port, model=wyoming.model_name(args.model, args.onnx_dir, args.int8))


def _parser() -> argparse.ArgumentParser:
    parser = cli.new_parser("asr.serve", __doc__)
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=8765, help="TCP port (default 8765; 0 picks a free one)")
    parser.add_argument("--max-streams", type=int, default=64, help="concurrent streams; more are closed with 1013")
    parser.add_argument("--token", default=os.environ.get("ASR_SERVE_TOKEN"),
                        help="require this secret (?token= or 'Authorization: Bearer'); default $ASR_SERVE_TOKEN")
    parser.add_argument("--idle-timeout", type=cli.finite_float, default=30.0, help="close a stream silent this many seconds")
    parser.add_argument("--max-message", type=int, default=256 * 1024, help="largest audio message in bytes")
    parser.add_argument("--max-upload", type=cli.finite_float, default=25.0, metavar="MB",
                        help="largest file of POST /v1/audio/transcriptions in MB (default 25); more is refused with 413")
    parser.add_argument("--max-batch", type=int, default=64, help="most chunks in one encoder pass")
    parser.add_argument("--batch-wait", type=cli.finite_float, default=BATCH_WAIT_MS, metavar="MS",
                        help=f"longest a chunk waits for others to share its encoder pass, in ms (default "
                             f"{BATCH_WAIT_MS:g}: never; saves CPU below the knee at a cost in latency; a lone stream never waits)")
    parser.add_argument("--workers", type=int, default=cores(),
                        help="serving processes behind the port, each with its own model (default: the number of "
                             f"cores, {cores()} here)")
    parser.add_argument("--log-json", action="store_true", help="log one JSON object per line on stderr")
    parser.add_argument("--wyoming", type=_wyoming_uri, metavar="tcp://HOST:PORT",
                        help="also serve the Wyoming protocol (Home Assistant, Rhasspy) on this address, such as "
                             "tcp://0.0.0.0:10300; it has no authentication")
    cli.add_model_args(parser)
    cli.add_decoder_args(parser)
    cli.add_endpoint_args(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    for name, low in (("port", 0), ("max_streams", 1), ("max_message", 2), ("max_batch", 1), ("workers", 1)):
        if getattr(args, name) < low:
            parser.error(f"--{name.replace('_', '-')} must be >= {low} (got {getattr(args, name)})")
    if args.port > 65535:
        parser.error(f"--port must be <= 65535 (got {args.port})")
    if not args.batch_wait >= 0:
        parser.error(f"--batch-wait must be >= 0 ms (got {args.batch_wait:g})")
    if not args.max_upload > 0:
        parser.error(f"--max-upload must be > 0 MB (got {args.max_upload:g})")
    if args.idle_timeout <= 0:
        parser.error(f"--idle-timeout must be > 0 (got {args.idle_timeout})")
    if args.token is not None and not args.token:
        parser.error("--token must not be empty")
    if args.wyoming is not None and args.wyoming.port == args.port != 0:
        parser.error(f"--wyoming needs a port of its own, not --port's ({args.port})")
    try:  # the files the options name, before any worker loads a model
        checks.options(args)
        cli.endpoint_config(args).validate()
    except ValueError as err:
        cli.error("serve", err)
        return 1
    from asr.server.worker import LOAD_ERRORS, build_app, serve  # noqa: PLC0415 (aiohttp: only once checked)
    logs.setup(args.log_json)
    supervisor = Supervisor(args, args.workers) if args.workers > 1 else None

    def listening(port: int) -> None:
        ready = round(time.monotonic() - STARTED, 1)
        workers = {"workers": args.workers, **supervisor.load_times()} if supervisor else {}
        log.info(f"ready in {ready:g} s: listening on http://{args.host}:{port}/ "
                 f"(stream to ws://{args.host}:{port}/asr); Ctrl-C to stop", extra={"ready_s": ready, **workers})
        if args.host not in ("127.0.0.1", "localhost", "::1") and args.token is None:
            log.warning("listening beyond this machine without --token: anyone who can reach the port can use it")
        if args.wyoming is not None:
            log.info(f"Wyoming on {args.wyoming.uri} (model {args.wyoming.model})")
            if args.wyoming.host not in ("127.0.0.1", "localhost", "::1"):
                log.warning("Wyoming has no authentication: anyone who can reach its port can use it")
    try:
        with claim_port(args.host, args.port), ExitStack() as held:  # whatever the workers: a served port is refused
            if args.wyoming is not None:
                try:
                    args.wyoming = _hold_wyoming(args, held)
                except OSError as err:
                    cli.error("serve", f"cannot listen for Wyoming on {args.wyoming.uri}: {err.strerror or err}")
                    return 1
            if args.workers == 1:
                try:
                    app = build_app(args)
                except LOAD_ERRORS as err:
                    cli.error("serve", err)
                    return 1
                return 0 if asyncio.run(serve(app, args.host, args.port, False, listening, args.wyoming)) else 1
            try:
                return supervisor.run(listening)
            except (StartError, ValueError) as err:
                cli.error("serve", err)
                return 1
    except OSError as err:  # the port is taken, the host unknown
        cli.error("serve", f"cannot listen on {args.host}:{args.port}: {err.strerror or err}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
