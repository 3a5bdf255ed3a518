"""asr.serve under load: N concurrent clients streaming real audio at real time.

    python scripts/bench/serve.py [--clients 1 5 10 20 40] [--seconds 15] [--out benchmarks/] [--no-search]

Starts `python -m asr.serve --port 0` (the default decoding: beam search with the word LM for
partials and finals) and, for each N, N clients that each send `--seconds` of speech (the shipped
examples in a loop, with pauses, each client from its own offset) in 100 ms messages paced like
a microphone, starting at random moments within the first 500 ms. Latency is measured at the
client, end to end: from sending the message that completes the audio an event covers (its
`time`) to receiving the event. Server CPU (% of one core) and RSS come from /proc over the same
window. Then the largest N whose p95 stays under 250 ms is searched for: N doubles until p95
fails (or reaches --max-clients), then bisection (--no-search skips it). The clients run in this
process, on the same cores as the server. Prints a markdown table; writes OUT/serve.md and OUT/serve.json.
"""
from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import soundfile as sf
from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parents[2]
RATE, MESSAGE = 16000, 1600  # 100 ms per message
TARGET_MS = 250.0


def speech(seconds: float, offset: int) -> np.ndarray:
    """`seconds` of int16 speech: the shipped examples in turn with 0.6 s pauses, from `offset` samples in."""
    pieces = []
    for path in sorted((ROOT / "asr" / "examples").glob("*.flac")):
        pieces += [sf.read(path, dtype="int16")[0], np.zeros(RATE * 6 // 10, np.int16)]
    loop = np.concatenate(pieces)
    total = round(seconds * RATE)
    return np.resize(np.roll(loop, -offset), total)


async def client(url: str, audio: np.ndarray, delay: float) -> list[float]:
    """Stream `audio` at real time; the latency in ms of every event received while streaming."""
    await asyncio.sleep(delay)
    sent_at: list[float] = []  # send time of message i (covering samples up to (i+1) * MESSAGE)
    latencies: list[float] = []
    async with connect(url, max_size=None) as ws:
        async def receive() -> None:
            async for message in ws:
                now = time.perf_counter()
                event = json.loads(message)
                index = max(0, -(-round(event["time"] * RATE) // MESSAGE) - 1)
                if index < len(sent_at) and not ending.is_set():
                    latencies.append((now - sent_at[index]) * 1000)
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
        await receiver
    return latencies


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int, key: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(url: str, pid: int, n: int, seconds: float, seed: int = 0) -> dict:
    """One load level: N clients at once."""
    rng = random.Random(seed + n)
    audios = [speech(seconds, rng.randrange(RATE * 5)) for _ in range(n)]
    delays = [rng.uniform(0, 0.5) for _ in range(n)]

    async def run() -> list[list[float]]:
        return await asyncio.gather(*(client(url, a, d) for a, d in zip(audios, delays)))
    cpu, wall = cpu_seconds(pid), time.perf_counter()
    latencies = np.concatenate([np.asarray(x) for x in asyncio.run(run())])
    cpu, wall = cpu_seconds(pid) - cpu, time.perf_counter() - wall
    p50, p95 = np.percentile(latencies, [50, 95]) if latencies.size else (float("nan"),) * 2
    return {"clients": n, "events": int(latencies.size), "p50_ms": round(float(p50), 1),
            "p95_ms": round(float(p95), 1), "max_ms": round(float(latencies.max()), 1) if latencies.size else None,
            "server_cpu_pct": round(100 * cpu / wall, 1), "server_rss_mb": round(rss_mb(pid), 1),
            "server_peak_rss_mb": round(rss_mb(pid, "VmHWM"), 1), "load_1min": round(os.getloadavg()[0], 2)}


def table(rows: list[dict]) -> str:
    lines = ["| clients | events | p50 ms | p95 ms | max ms | server CPU (% of one core) | server RSS MB | machine load (1 min) |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in sorted(rows, key=lambda r: r["clients"]):
        lines.append(f"| {r['clients']} | {r['events']} | {r['p50_ms']} | {r['p95_ms']} | {r['max_ms']} | "
                     f"{r['server_cpu_pct']} | {r['server_rss_mb']} | {r.get('load_1min', '-')} |")
    return "\n".join(lines)


def render(result: dict) -> str:
    """serve.md from the measurements."""
    return (f"# asr.serve: concurrent real-time streams\n\n"
            f"`python scripts/bench/serve.py` on {result['cpus']} CPU cores ({result['date']}); server options: "
            f"{result['server_args']}. Each client streams {result['seconds_per_client']:g} s of speech at real time "
            f"in 100 ms messages; latency is end to end at the client, from sending the audio an event covers to "
            f"receiving the event (partials every 500 ms, finals at endpoints). Server RSS idle: "
            f"{result['idle_rss_mb']} MB.\n\n{table(result['rows'])}\n\n"
            f"Largest N with p95 < 250 ms: **{result['largest_n_p95_under_250ms']}**\n\n"
            f"One server process uses about one core (the model's batched step runs outside Python's GIL, the "
            f"per-stream decoding and the sockets inside it), so the knee is where it saturates one core; the "
            f"clients run in the benchmark's own process on the same cores, and the machine's cores are shared "
            f"with other work, so the knee moves with that load: the last column is the machine's 1-minute load "
            f"average after each row (this benchmark alone adds about 1-1.5). RSS grows past the knee with queued "
            f"audio.\n")


def largest_under(rows: list[dict]) -> int | None:
    passing = [r["clients"] for r in rows if r["p95_ms"] < TARGET_MS]
    return max(passing) if passing else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python scripts/bench/serve.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, nargs="+", default=[1, 5, 10, 20, 40])
    p.add_argument("--seconds", type=float, default=15.0, help="audio each client streams")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks")
    p.add_argument("--no-search", action="store_true", help="skip the search for the largest N under 250 ms")
    p.add_argument("--max-clients", type=int, default=320, help="the search stops here")
    p.add_argument("--server-args", default="", help="extra asr.serve options, e.g. '--greedy'")
    args = p.parse_args(argv)
    if min(args.clients) < 1 or args.seconds <= 0:
        p.error("--clients must be >= 1 and --seconds > 0")
    server = subprocess.Popen([sys.executable, "-m", "asr.serve", "--port", "0", "--max-streams", "1000",
                               *args.server_args.split()], cwd=ROOT, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        match = re.search(r"127\.0\.0\.1:(\d+)/", server.stderr.readline())
        if not match:
            print("serve benchmark: error: asr.serve did not start", file=sys.stderr)
            return 1
        url = f"ws://127.0.0.1:{match.group(1)}/asr"
        idle_rss = rss_mb(server.pid)
        measure(url, server.pid, 2, 3.0)  # warm-up: first-call costs stay out of the 1-client row

        def level(n: int) -> dict:
            row = measure(url, server.pid, n, args.seconds)
            print(f"serve benchmark: {n} clients: p50 {row['p50_ms']} ms, p95 {row['p95_ms']} ms, "
                  f"server CPU {row['server_cpu_pct']} %", flush=True)
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
    finally:
        server.terminate()
        server.wait(30)
    best = largest_under(rows)
    result = {"rows": sorted(rows, key=lambda r: r["clients"]), "largest_n_p95_under_250ms": best,
              "idle_rss_mb": round(idle_rss, 1), "seconds_per_client": args.seconds, "cpus": os.cpu_count(),
              "server_args": args.server_args or "(defaults: beam search with the bundled word LM)",
              "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M")}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "serve.md").write_text(render(result))
    (args.out / "serve.json").write_text(json.dumps(result, indent=1) + "\n")
    print(table(rows) + f"\n\nlargest N with p95 < 250 ms: {best}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
