"""The least CPU a served stream costs, and so the most streams the cores could carry.

    python scripts/bench/ceiling.py [--rows 1 2 4 8 16 32 64] [--seconds 20] [--int8] [--clients 40]
                                    [--socket-seconds 15] [--out benchmarks/serve]

Two parts of every 500 ms chunk of every stream, each measured on its own, with nothing else between:

1. **Recognition.** R streams of the serve benchmark's speech (`scripts/bench/serve.py`), stepped in
   lockstep through the server's own `asr.server.recognition.Recognition` with the default decoding:
   one pass of R chunks at a time (features, the batched model step, the word-LM search, endpointing,
   punctuation), on one thread in this process. CPU ms per chunk for each R, the model's share apart.
2. **Sockets.** A bare server on the `aiohttp` web stack that asr.serve runs on, with its options:
   it receives the benchmark's 100 ms int16 messages from C clients (serve.py's own client, in this
   process) and answers every fifth with a small event, doing nothing else. Its process's CPU ms per
   chunk (five messages in, one event out).

The bound is cores x 500 ms / (1 + 2): how many real-time streams the cores could carry if serving
cost nothing beyond these, every pass held R chunks, and the clients ran elsewhere. The second bound
adds the clients' own CPU per chunk (this process's, while part 2 runs), as in serve.py, whose clients
share the cores with the server. asr.serve's knee sits below both by its own per-message work and by
passes smaller than R. Writes OUT/serve_ceiling.md and .json (serve_ceiling_int8 with --int8).
"""
from __future__ import annotations

import asr  # noqa: F401  (first: it keeps numpy's BLAS to one thread before numpy loads)

import argparse
import asyncio
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.request import urlopen

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the scripts/ folder: `bench` package

from bench.serve import client  # noqa: E402
from bench.speech import RATE, speech  # noqa: E402
from bench.server_process import ROOT  # noqa: E402

CHUNK = RATE // 2  # asr.serve's step: 500 ms


def recognition_cost(rows: list[int], seconds: float, int8: bool) -> list[dict]:
    """CPU ms per chunk of lockstep passes of R streams through `Recognition`, for each R in `rows`."""
    from asr.decoding.decoder import Decoder
    from asr.decoding.endpoint import EndpointConfig
    from asr.model.recognizer import Recognizer
    from asr.server.recognition import Recognition

    from bench.ours import cpu_timed

    recognizer = Recognizer.load(int8=int8)
    recognition = Recognition(recognizer, Decoder.load(recognizer.tokenizer, "bundled"), EndpointConfig())
    spent: dict[str, float] = {}
    out = []
    for r in rows:
        rng = np.random.default_rng(r)
        waves = [speech(seconds, int(rng.integers(5 * RATE))).astype(np.float32) / 32768 for _ in range(r)]
        streams = [recognition.open() for _ in range(r)]
        recognition.advance(streams, [w[:CHUNK] for w in waves])  # first-call costs stay out
        spent["model"], chunks, began = 0.0, 0, time.process_time()
        with cpu_timed(recognizer, "step_many", spent, "model"):  # the features and the model's batched step
            for start in range(CHUNK, waves[0].size, CHUNK):
                recognition.advance(streams, [w[start:start + CHUNK] for w in waves])
                chunks += r
        total_ms = 1000 * (time.process_time() - began) / chunks
        model_ms = 1000 * spent["model"] / chunks
        out.append({"rows": r, "chunks": chunks, "cpu_ms_per_chunk": round(total_ms, 2),
                    "features_and_model_ms": round(model_ms, 2), "decoding_ms": round(total_ms - model_ms, 2)})
        print(f"ceiling: {r} rows per pass: {total_ms:.2f} ms per chunk (features and model {model_ms:.2f})", flush=True)
    return out


BARE_SERVER = """
import asyncio, json, socket, sys, time
import numpy as np
from aiohttp import WSMsgType, web

async def handle(request):
    ws = web.WebSocketResponse(max_msg_size=1 << 20, compress=False, heartbeat=20)
    await ws.prepare(request)
    received = 0
    async for message in ws:
        if message.type != WSMsgType.BINARY:
            break
        received += np.frombuffer(message.data, dtype="<i2").astype(np.float32).size
        if received % 8000 == 0:
            await ws.send_str(json.dumps({"segment": 0, "text": "a partial of about this length", "is_final": False,
                                          "time": received / 16000, "words": []}))
    await ws.close()
    return ws

async def cpu(request):  # the server's own CPU seconds, all threads, at the clock's full resolution
    return web.Response(text=repr(time.process_time()))

async def main():
    app = web.Application()
    app.router.add_get("/", handle)
    app.router.add_get("/cpu", cpu)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = socket.create_server(("127.0.0.1", 0), backlog=100)
    await web.SockSite(runner, sock).start()
    print(sock.getsockname()[1], flush=True)
    await asyncio.Future()

asyncio.run(main())
"""


def socket_cost(clients: int, seconds: float) -> dict:
    """CPU ms per chunk of the bare aiohttp WebSocket server under `clients` real-time clients (the server reads its
    own CPU clock: /proc's clock ticks of 10 ms miss a small run's few milliseconds)."""
    proc = subprocess.Popen([sys.executable, "-c", BARE_SERVER], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        port = int(proc.stdout.readline())
        url = f"ws://127.0.0.1:{port}/"

        def server_cpu() -> float:
            with urlopen(f"http://127.0.0.1:{port}/cpu", timeout=10) as reply:
                return float(reply.read())
        rng = np.random.default_rng(0)

        async def run() -> list:
            return await asyncio.gather(*(client(url, speech(seconds, int(rng.integers(5 * RATE))), float(rng.uniform(0, 0.5)),
                                                 np.zeros(0, int)) for _ in range(clients)))
        cpu, mine, wall = server_cpu(), time.process_time(), time.perf_counter()
        results = asyncio.run(run())
        cpu, mine, wall = server_cpu() - cpu, time.process_time() - mine, time.perf_counter() - wall
    finally:
        proc.kill()
        proc.wait()
    chunks = clients * seconds * 2
    latencies = np.concatenate([np.asarray(r[0]) for r in results])
    row = {"clients": clients, "seconds": seconds, "server_cpu_pct": round(100 * cpu / wall, 1),
           "cpu_ms_per_chunk": round(1000 * cpu / chunks, 2), "clients_cpu_ms_per_chunk": round(1000 * mine / chunks, 2),
           "events": int(latencies.size),
           "p95_ms": round(float(np.percentile(latencies, 95)), 1)}
    print(f"ceiling: bare aiohttp WebSocket server, {clients} clients: {row['cpu_ms_per_chunk']} ms per chunk (the clients "
          f"{row['clients_cpu_ms_per_chunk']})", flush=True)
    return row


def render(result: dict) -> str:
    sockets, cores = result["sockets"], result["cpus"]
    lines = ["| chunks per pass | recognition ms per chunk | of which features + model | + sockets | "
             f"most streams on {cores} cores | the same, the clients on those cores too |", "|---:|---:|---:|---:|---:|---:|"]
    for r in result["recognition"]:
        lines.append(f"| {r['rows']} | {r['cpu_ms_per_chunk']} | {r['features_and_model_ms']} | "
                     f"{r['cpu_ms_per_chunk'] + sockets['cpu_ms_per_chunk']:.2f} | {r['bound_streams']} | "
                     f"{r['bound_streams_with_clients']} |")
    return (f"# asr.serve: the most streams the cores could carry\n\n`python scripts/bench/ceiling.py` on "
            f"{result['machine']} ({result['date']}), graph: {'int8' if result['int8'] else 'fp32'}, the default decoding (beam search "
            f"with the bundled word LM). Recognition: the server's `Recognition` stepping R streams of the serve "
            f"benchmark's speech in lockstep, one thread, CPU per 500 ms chunk. Sockets: a bare server on the same "
            f"`aiohttp` web stack that does nothing but receive {sockets['clients']} real-time clients' 100 ms messages "
            f"and send an event per 500 ms: {sockets['cpu_ms_per_chunk']} ms of CPU per chunk "
            f"({sockets['server_cpu_pct']}% of one core), and the clients (serve.py's own) {sockets['clients_cpu_ms_per_chunk']} "
            f"ms. The bound is {cores} x 500 ms / (recognition + sockets): what the cores could carry if every pass held "
            f"R chunks and nothing else ran; the last column adds the clients' CPU to the divisor, as in "
            f"`scripts/bench/serve.py`, whose clients share the cores with the server.\n\n" + "\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python scripts/bench/ceiling.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    p.add_argument("--seconds", type=float, default=20.0, help="audio per stream of part 1")
    p.add_argument("--int8", action="store_true", help="the export's int8 graph")
    p.add_argument("--clients", type=int, default=40, help="clients of the bare socket server")
    p.add_argument("--socket-seconds", type=float, default=15.0, help="audio each of them streams")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "serve")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: bench.quiet, the load guard
    from bench import quiet  # noqa: PLC0415
    args = quiet.parse_guarded(p, argv, "ceiling")  # committed figures: only on a quiet machine
    if min(args.rows) < 1 or args.clients < 1 or min(args.seconds, args.socket_seconds) < 1:
        p.error("--rows and --clients must be >= 1, --seconds and --socket-seconds >= 1")
    machine = quiet.machine()
    recognition = recognition_cost(args.rows, args.seconds, args.int8)
    sockets = socket_cost(args.clients, args.socket_seconds)
    cores = os.cpu_count() or 1
    for r in recognition:
        served = r["cpu_ms_per_chunk"] + sockets["cpu_ms_per_chunk"]
        r["bound_streams"] = int(cores * 500 / served)
        r["bound_streams_with_clients"] = int(cores * 500 / (served + sockets["clients_cpu_ms_per_chunk"]))
    result = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "cpus": cores, "machine": machine,
              "int8": args.int8,
              "recognition": recognition, "sockets": sockets}
    args.out.mkdir(parents=True, exist_ok=True)
    name = "serve_ceiling_int8" if args.int8 else "serve_ceiling"
    (args.out / f"{name}.md").write_text(render(result))
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
