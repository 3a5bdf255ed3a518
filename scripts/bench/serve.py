"""asr.serve under load: N concurrent clients streaming real audio at real time; or a soak.

    python scripts/bench/serve.py [--clients 1 5 10 20 40] [--seconds 15] [--workers N] [--out benchmarks/serve]
                                  [--no-search] [--server-args '--backend onnx' --name serve_onnx]
                                  [--baseline '--backend onnx']    (a second server, same window, same report)
    python scripts/bench/serve.py --uploads 2 [--upload-seconds 60] --name serve_uploads    (files beside the streams)
    python scripts/bench/serve.py --soak 30 [--soak-clients 40] [--workers N]    (see scripts/bench/soak.py)

Starts `python -m asr.serve --port 0` (the default decoding: beam search with the word LM for
partials and finals; --workers N processes, default one per core) and, for each N, N clients that
each send `--seconds` of speech (the shipped examples in a loop, with pauses, each client from its
own offset) in 100 ms messages paced like a microphone, starting at random moments within the
first 500 ms. Latency is measured at the client, end to end: from sending the message that
completes the audio an event covers (its `time`) to receiving the event. End of speech -> final is
from the moment the last word of an example was spoken (its end by the model's word times on the
example alone; a message is "spoken" when it is sent, as a microphone delivers 100 ms buffers) to
receiving the final that closes it. Server CPU (all processes, % of one core) and RSS per worker
come from /proc over the same window. Then the largest N whose p95 stays under 250 ms is searched
for: N doubles until p95 fails (or reaches --max-clients), then bisection (--no-search skips it).
The clients run in this process, on the same cores as the server. With --baseline, a second server
(those options instead of --server-args) is surveyed the same way right after, so two configurations
compare under the same machine load. With --uploads U, U more clients post a long file (the same speech,
--upload-seconds of it, as WAV) to POST /v1/audio/transcriptions over and over while the streams run,
each starting its next upload when the last one's answer arrives: the rows then say what uploads cost
the live streams, and how fast the uploads went (seconds of audio transcribed per second).
Prints a markdown table; writes OUT/NAME.md and OUT/NAME.json (--name, default serve).
"""
from __future__ import annotations

import argparse
import asyncio
import datetime
import functools
import io
import json
import os
import random
import sys
import time
from pathlib import Path

import aiohttp
import numpy as np
import soundfile as sf
from websockets.asyncio.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the scripts/ folder: `bench` package

from bench.server_process import ROOT, ServerUnderTest  # noqa: E402
from bench.speech import EXAMPLES, MESSAGE, PAUSE, RATE, speech, speech_loop  # noqa: E402

TARGET_MS = 250.0


def speech_ends() -> list[int]:
    """Where speech ends in the loop (samples): each example's last word end by the bundled model's
    word times (its default decoding), on the example alone."""
    from asr.audio.chunks import rechunk
    from asr.decoding.decoder import Decoder
    from asr.decoding.endpoint import emissions
    from asr.model.recognizer import Recognizer
    recognizer = Recognizer.load()
    decoder = Decoder.load(recognizer.tokenizer, "bundled")
    ends, start = [], 0
    for path in EXAMPLES:
        wave = sf.read(path, dtype="float32")[0]
        words = [w for e in emissions(recognizer, rechunk([wave], RATE // 2), decoder) if e.is_final for w in e.words]
        ends.append(start + round(max(w.end for w in words) * RATE))
        start += wave.size + PAUSE
    return ends


def client_ends(loop_ends: list[int], loop_size: int, offset: int, total: int) -> np.ndarray:
    """The speech ends of one client's audio (`speech(total / RATE, offset)`), ascending."""
    first = [(e - offset) % loop_size for e in loop_ends]
    return np.sort([e + k * loop_size for e in first for k in range(total // loop_size + 1) if e + k * loop_size < total])


async def client(url: str, audio: np.ndarray, delay: float, ends: np.ndarray) -> tuple[list[float], list[float]]:
    """Stream `audio` at real time; the latency in ms of every event received while streaming, and the
    end of speech -> final delay in s of every final that closed a segment at its endpoint."""
    await asyncio.sleep(delay)
    sent_at: list[float] = []  # send time of message i (covering samples up to (i+1) * MESSAGE)
    latencies: list[float] = []
    finals: list[tuple[float, float]] = []  # (received at, stream time)
    async with connect(url, max_size=None) as ws:
        async def receive() -> None:
            async for message in ws:
                now = time.perf_counter()
                event = json.loads(message)
                index = max(0, -(-round(event["time"] * RATE) // MESSAGE) - 1)
                if index < len(sent_at) and not ending.is_set():
                    latencies.append((now - sent_at[index]) * 1000)
                    if event["is_final"]:
                        finals.append((now, event["time"]))
        ending = asyncio.Event()
        receiver = asyncio.create_task(receive())
        began = time.perf_counter()
        for i, start in enumerate(range(0, len(audio), MESSAGE)):
            await asyncio.sleep(max(0.0, began + i * MESSAGE / RATE - time.perf_counter()))
            sent_at.append(time.perf_counter())
            await ws.send(audio[start:start + MESSAGE].tobytes())
        await asyncio.sleep(0.3)  # the last chunk's events
        ending.set()
        await ws.send(json.dumps({"type": "end"}))
        await asyncio.wait_for(receiver, 60)
    delays = []
    for received, stream_time in finals:
        before = ends[ends <= round(stream_time * RATE)]
        if before.size and stream_time * RATE - before[-1] < 2 * RATE:
            end = int(before[-1])
            message = max(0, (end - 1) // MESSAGE)  # the message holding the last spoken sample
            spoken = sent_at[message] - ((message + 1) * MESSAGE - end) / RATE
            delays.append(received - spoken)
    return latencies, delays


@functools.cache
def upload_file(seconds: float) -> bytes:
    """`seconds` of the speech loop as a 16 kHz int16 WAV file."""
    out = io.BytesIO()
    sf.write(out, speech(seconds, 0), RATE, format="WAV", subtype="PCM_16")
    return out.getvalue()


async def uploader(port: int, data: bytes, seconds: float, done: list[float]) -> None:
    """POST the file to /v1/audio/transcriptions again and again (until cancelled); each answer's audio seconds
    go into `done`."""
    url = f"http://127.0.0.1:{port}/v1/audio/transcriptions"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as session:
        while True:
            form = aiohttp.FormData()
            form.add_field("file", data, filename="long.wav", content_type="audio/wav")
            form.add_field("response_format", "text")
            async with session.post(url, data=form) as response:
                if response.status != 200:
                    raise RuntimeError(f"upload refused: {response.status} {await response.text()}")
                await response.read()
            done.append(seconds)


def measure(server: ServerUnderTest, loop_ends: list[int], n: int, seconds: float, seed: int = 0,
            uploads: int = 0, upload_seconds: float = 60.0) -> dict:
    """One load level: N clients at once (and `uploads` clients posting a file of `upload_seconds` meanwhile)."""
    rng = random.Random(seed + n)
    loop_size = speech_loop().size
    offsets = [rng.randrange(RATE * 5) for _ in range(n)]
    total = round(seconds * RATE)
    delays = [rng.uniform(0, 0.5) for _ in range(n)]

    uploaded: list[float] = []  # audio seconds of each upload answered

    async def run() -> list[tuple[list[float], list[float]]]:
        posting = [asyncio.create_task(uploader(server.port, upload_file(upload_seconds), upload_seconds, uploaded))
                   for _ in range(uploads)]
        try:
            return await asyncio.gather(*(client(server.url, speech(seconds, o), d, client_ends(loop_ends, loop_size, o, total))
                                          for o, d in zip(offsets, delays)))
        finally:
            for task in posting:  # an upload still running is dropped with the window
                task.cancel()
            for task in posting:
                try:
                    await task
                except asyncio.CancelledError:
                    pass
    rows, passes = server.metric("asr_batch_rows_sum"), server.metric("asr_batch_rows_count")
    cpu, wall = server.cpu_seconds(), time.perf_counter()
    results = asyncio.run(run())
    cpu, wall = server.cpu_seconds() - cpu, time.perf_counter() - wall
    rows, passes = server.metric("asr_batch_rows_sum") - rows, server.metric("asr_batch_rows_count") - passes
    latencies = np.concatenate([np.asarray(r[0]) for r in results])
    finals = np.concatenate([np.asarray(r[1]) for r in results])
    p50, p95 = np.percentile(latencies, [50, 95]) if latencies.size else (float("nan"),) * 2
    f50, f95 = np.percentile(finals, [50, 95]) if finals.size else (float("nan"),) * 2
    return {"clients": n, "events": int(latencies.size), "p50_ms": round(float(p50), 1),
            "p95_ms": round(float(p95), 1), "max_ms": round(float(latencies.max()), 1) if latencies.size else None,
            "finals": int(finals.size), "final_p50_s": round(float(f50), 3), "final_p95_s": round(float(f95), 3),
            "server_cpu_pct": round(100 * cpu / wall, 1), "rows_per_pass": round(rows / passes, 2) if passes else None,
            "worker_rss_mb": server.rss_mb(),
            "worker_peak_rss_mb": server.rss_mb("VmHWM"), "load_1min": round(os.getloadavg()[0], 2),
            "uploads": uploads, "uploads_done": len(uploaded),
            "upload_audio_s_per_s": round(sum(uploaded) / wall, 2) if uploads else None}


def megabytes(values: list[float]) -> str:
    """Per-worker MB figures as 'a / b'."""
    return " / ".join(f"{x:.0f}" for x in values)


def table(rows: list[dict]) -> str:
    """The rows as markdown; with uploads beside the streams, a column for them (answered, audio s per s)."""
    uploads = any(r.get("uploads") for r in rows)
    lines = ["| clients | events | p50 ms | p95 ms | max ms | end of speech -> final p50 / p95 s | "
             "server CPU (% of one core) | chunks per model pass | RSS per worker MB | machine load (1 min) |"
             + (" uploads answered, audio s per s |" if uploads else ""),
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if uploads else "")]
    for r in sorted(rows, key=lambda r: r["clients"]):
        rss = megabytes(r["worker_rss_mb"])
        lines.append(f"| {r['clients']} | {r['events']} | {r['p50_ms']} | {r['p95_ms']} | {r['max_ms']} | "
                     f"{r['final_p50_s']} / {r['final_p95_s']} | {r['server_cpu_pct']} | {r.get('rows_per_pass') or '-'} | {rss} | "
                     f"{r.get('load_1min', '-')} |" + (f" {r['uploads_done']}, {r['upload_audio_s_per_s']} |" if uploads else ""))
    return "\n".join(lines)


def render(result: dict) -> str:
    """serve.md from the measurements."""
    return (f"# asr.serve: concurrent real-time streams\n\n"
            f"`python scripts/bench/serve.py` on {result['machine']} "
            f"({result['date']}); server options: "
            f"{result['server_args']}, {result['workers']} worker process(es). Each client streams "
            f"{result['seconds_per_client']:g} s of speech at real time in 100 ms messages; latency is end to end at the "
            f"client, from sending the audio an event covers to receiving the event (partials every 500 ms, finals "
            f"at endpoints); end of speech -> final runs from the moment the last word was spoken (a message counts "
            f"as spoken when it is sent, as from a microphone's 100 ms buffers) to receiving its final, the 0.4 s of "
            f"trailing silence included. RSS per worker, idle: {megabytes(result['idle_rss_mb'])} MB.{uploads_note(result)}"
            f"\n\n{table(result['rows'])}\n\n"
            f"Largest N with p95 < 250 ms: **{result['largest_n_p95_under_250ms']}**\n\n"
            f"Each worker is one process with its own model that uses about one core (the model's batched step runs "
            f"outside Python's GIL, the per-stream decoding and the sockets inside it) and batches the ready chunks "
            f"of its streams (chunks per model pass: `asr_batch_rows` from /metrics, over all workers); the kernel spreads the "
            f"connections over the workers (SO_REUSEPORT). The clients run in the benchmark's own process on the same "
            f"cores, and the machine's cores are shared with other work, so the knee moves with that load: the last "
            f"column is the machine's 1-minute load average after each row. RSS grows past the knee with queued "
            f"audio.\n" + baseline_section(result.get("baseline")))


def uploads_note(result: dict) -> str:
    """What ran beside the streams, when uploads did (--uploads)."""
    if not result.get("uploads"):
        return ""
    return (f" Beside the streams, {result['uploads']} client(s) posted a {result['upload_seconds']:g} s WAV file to "
            f"POST /v1/audio/transcriptions over and over (`--uploads`), each the next as soon as its answer came.")


def baseline_section(base: dict | None) -> str:
    """The --baseline server's survey, run right after the first in the same window."""
    if base is None:
        return ""
    return (f"\n## Baseline in the same window\n\nServer options: {base['server_args']} (`--baseline`), surveyed right "
            f"after the run above by the same command ({base['date']}), {base['workers']} worker process(es). RSS per "
            f"worker, idle: {megabytes(base['idle_rss_mb'])} MB.\n\n{table(base['rows'])}\n\n"
            f"Largest N with p95 < 250 ms: **{base['largest_n_p95_under_250ms']}**\n")


def largest_under(rows: list[dict]) -> int | None:
    passing = [r["clients"] for r in rows if r["p95_ms"] < TARGET_MS]
    return max(passing) if passing else None


def survey(server_args: list[str], args: argparse.Namespace, loop_ends: list[int]) -> dict:
    """One server configuration: start it, measure each --clients level, search for the knee, stop it."""
    server = ServerUnderTest(server_args)
    try:
        idle_rss = server.rss_mb()
        measure(server, loop_ends, 2, 3.0)  # warm-up: first-call costs stay out of the 1-client row

        def level(n: int) -> dict:
            row = measure(server, loop_ends, n, args.seconds, uploads=args.uploads, upload_seconds=args.upload_seconds)
            print(f"serve benchmark: {n} clients: p50 {row['p50_ms']} ms, p95 {row['p95_ms']} ms, end of speech -> "
                  f"final p50 {row['final_p50_s']} s, server CPU {row['server_cpu_pct']} %, RSS per worker "
                  f"{row['worker_rss_mb']} MB" + (f", uploads {row['uploads_done']} done, "
                  f"{row['upload_audio_s_per_s']} s of audio per s" if args.uploads else ""), flush=True)
            return row
        rows = [level(n) for n in args.clients]
        while not args.no_search:  # double N until p95 fails (or --max-clients), then bisect
            good, bad = largest_under(rows) or 0, min((r["clients"] for r in rows if r["p95_ms"] >= TARGET_MS),
                                                      default=None)
            if bad is None:
                if good >= args.max_clients:
                    break
                n = min(2 * good, args.max_clients)
            elif bad - good <= max(2, good // 10):
                break
            else:
                n = (good + bad) // 2
            if any(r["clients"] == n for r in rows):
                break
            rows.append(level(n))
        workers = len(server.workers())
    finally:
        server.stop()
    return {"rows": sorted(rows, key=lambda r: r["clients"]), "largest_n_p95_under_250ms": largest_under(rows),
            "idle_rss_mb": idle_rss, "workers": workers, "seconds_per_client": args.seconds, "cpus": os.cpu_count(),
            "machine": args.machine,
            "uploads": args.uploads, "upload_seconds": args.upload_seconds,
            "server_args": " ".join(server_args) or "(defaults: beam search with the bundled word LM)",
            "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python scripts/bench/serve.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, nargs="+", default=[1, 5, 10, 20, 40])
    p.add_argument("--seconds", type=float, default=15.0, help="audio each client streams")
    p.add_argument("--workers", type=int, default=None, help="asr.serve --workers (default: its own, one per core)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "serve")
    p.add_argument("--name", default="serve", help="the report files: OUT/NAME.md and OUT/NAME.json")
    p.add_argument("--no-search", action="store_true", help="skip the search for the largest N under 250 ms")
    p.add_argument("--max-clients", type=int, default=320, help="the search stops here")
    p.add_argument("--server-args", default="", help="extra asr.serve options, e.g. '--greedy' or '--backend onnx'")
    p.add_argument("--baseline", metavar="SERVER_ARGS", help="then the same survey of a server with these options "
                   "(e.g. '--backend onnx'), in the same window and the same report")
    p.add_argument("--uploads", type=int, default=0, metavar="U",
                   help="U clients posting a long file to /v1/audio/transcriptions, one after another, beside the streams")
    p.add_argument("--upload-seconds", type=float, default=60.0, help="the uploaded file's length in seconds")
    p.add_argument("--soak", type=float, metavar="MINUTES", help="run the soak (scripts/bench/soak.py) instead")
    p.add_argument("--soak-clients", type=int, default=40, help="client slots of the soak")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: bench.quiet, the load guard
    from bench import quiet  # noqa: PLC0415

    quiet.add_allow_load(p)
    args = p.parse_args(argv)
    quiet.guard(args.allow_load, args.out, "serve")  # committed figures: only on a quiet machine
    if min(args.clients) < 1 or args.seconds <= 0 or (args.workers is not None and args.workers < 1):
        p.error("--clients and --workers must be >= 1 and --seconds > 0")
    if args.uploads < 0 or args.upload_seconds <= 0:
        p.error("--uploads must be >= 0 and --upload-seconds > 0")
    if args.soak is not None and (args.soak <= 0 or args.soak_clients < 1):
        p.error("--soak must be > 0 minutes and --soak-clients >= 1")
    if args.soak is not None and args.baseline is not None:
        p.error("--baseline compares surveys; the soak runs one server")
    args.machine = quiet.machine()  # measured before any server runs
    workers = [] if args.workers is None else ["--workers", str(args.workers)]
    configs = [args.server_args.split() + workers] + ([] if args.baseline is None else [args.baseline.split() + workers])
    result: dict | None = None
    try:
        if args.soak is not None:
            from bench.soak import soak
            return soak(ServerUnderTest(configs[0]), args.soak, args.soak_clients, args.out, " ".join(configs[0]))
        loop_ends = speech_ends()
        for config in configs:  # the report is written after each survey: a failed baseline keeps the first
            run = survey(config, args, loop_ends)
            if result is None:
                result = run
            else:
                result["baseline"] = run
            write_report(result, args.out, args.name)
            print(f"{run['server_args']}:\n{table(run['rows'])}\n\nlargest N with p95 < 250 ms: "
                  f"{run['largest_n_p95_under_250ms']}\n")
    except RuntimeError as err:  # a server did not start
        print(f"serve benchmark: error: {err}", file=sys.stderr)
        return 1
    return 0


def write_report(result: dict, out: Path, name: str) -> None:
    """OUT/NAME.md (keeping a soak section already there) and OUT/NAME.json."""
    out.mkdir(parents=True, exist_ok=True)
    report = out / f"{name}.md"
    previous = report.read_text() if report.exists() else ""
    soak_section = previous[previous.find("\n## Soak\n"):] if "\n## Soak\n" in previous else ""
    report.write_text(render(result) + soak_section)  # the soak's figures stay
    report.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
