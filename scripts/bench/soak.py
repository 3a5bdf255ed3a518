"""The soak: `--soak-clients` client slots connecting and disconnecting at random for `--soak` minutes.

    python scripts/bench/serve.py --soak 30 [--soak-clients 40] [--workers N] [--out benchmarks/serve]

Each slot runs sessions one after another until the time is up (at most MAX_SESSIONS): a session
streams 1-20 s of speech (the benchmark's loop, from a random offset) at real time in 100 ms messages,
then either ends properly (the end message, then every event until the server closes; 60% of
sessions), closes the connection part-way (20%) or drops it without a close frame part-way (20%),
then pauses 0-2 s. Every wait is bounded. Checked: worker RSS stays within 10% of its value after the
warm-up (the first 10% of the time, at least a minute, at most half), the server acknowledges all the audio of the
sessions that ended properly (the `time` of their last event equals the seconds sent), and no error
event arrives. Writes OUT/serve_soak.json and the "Soak" section of OUT/serve.md.
"""
from __future__ import annotations

import asyncio
import datetime
import json
import random
import time
from pathlib import Path
from urllib.request import urlopen

import numpy as np
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from bench.speech import MESSAGE, RATE, speech
from bench.server_process import ServerUnderTest

MAX_SESSIONS = 10_000  # per slot
RSS_EVERY = 10.0  # seconds between RSS samples
FLAT = 0.10  # RSS may move this much after the warm-up


async def session(url: str, rng: random.Random) -> dict:
    """One connection; what it sent, what the server acknowledged, and any error events."""
    seconds, mode = rng.uniform(1.0, 20.0), rng.choices(["end", "close", "drop"], [6, 2, 2])[0]
    audio = speech(seconds, rng.randrange(RATE * 20))
    stop_after = len(audio) if mode == "end" else rng.randrange(MESSAGE, len(audio) + 1)
    events: list[dict] = []
    sent = 0
    ws = await asyncio.wait_for(connect(url, max_size=None, open_timeout=10), 20)

    async def receive() -> None:
        try:
            async for message in ws:
                events.append(json.loads(message))
        except ConnectionClosed:
            pass
    receiver = asyncio.create_task(receive())
    began = time.perf_counter()
    try:
        for i, start in enumerate(range(0, stop_after, MESSAGE)):
            await asyncio.sleep(max(0.0, began + i * MESSAGE / RATE - time.perf_counter()))
            piece = audio[start:min(start + MESSAGE, stop_after)]
            await ws.send(piece.tobytes())
            sent += piece.size
        if mode == "end":
            await ws.send(json.dumps({"type": "end"}))
            await asyncio.wait_for(receiver, 60)
        elif mode == "close":
            await asyncio.wait_for(ws.close(), 20)
        else:
            ws.transport.abort()
    except (ConnectionClosed, asyncio.TimeoutError) as err:
        events.append({"client_error": type(err).__name__})
    finally:
        receiver.cancel()
        ws.transport.abort()
    ended = mode == "end" and ws.close_code == 1000
    return {"mode": mode, "sent_s": sent / RATE, "acked_s": max((e.get("time", 0.0) for e in events), default=0.0)
            if ended else None, "errors": [e for e in events if "error" in e or "client_error" in e],
            "close": ws.close_code}


async def slot(url: str, seed: int, stop_at: float, results: list[dict]) -> None:
    rng = random.Random(seed)
    for _ in range(MAX_SESSIONS):
        if time.monotonic() >= stop_at:
            return
        try:
            results.append(await session(url, rng))
        except (OSError, asyncio.TimeoutError, ConnectionClosed) as err:
            results.append({"mode": "connect", "sent_s": 0.0, "acked_s": None, "close": None,
                            "errors": [{"client_error": f"{type(err).__name__}: {err}"}]})
        await asyncio.sleep(rng.uniform(0.0, 2.0))


async def run(server: ServerUnderTest, minutes: float, clients: int) -> tuple[list[dict], list[dict]]:
    stop_at = time.monotonic() + minutes * 60
    results: list[dict] = []
    samples: list[dict] = []

    async def sample_rss() -> None:
        began = time.monotonic()
        while True:
            samples.append({"t_s": round(time.monotonic() - began, 1), "rss_mb": server.rss_mb(),
                            "pids": server.workers()})
            await asyncio.sleep(RSS_EVERY)
    sampler = asyncio.create_task(sample_rss())
    await asyncio.gather(*(slot(server.url, i, stop_at, results) for i in range(clients)))
    sampler.cancel()
    samples.append({"t_s": round(minutes * 60, 1), "rss_mb": server.rss_mb(), "pids": server.workers()})
    return results, samples


def flatness(samples: list[dict], warmup_s: float) -> dict:
    """Per worker: RSS at the end of the warm-up, the least and most after it, the largest relative move."""
    after = [s for s in samples if s["t_s"] >= warmup_s]
    if not after or any(s["pids"] != after[0]["pids"] for s in after):
        return {"flat": False, "note": "the workers changed (one restarted) or no sample after the warm-up"}
    base = np.array(after[0]["rss_mb"])
    series = np.array([s["rss_mb"] for s in after])
    move = float(np.max(np.abs(series - base) / base))
    return {"flat": move <= FLAT, "warmup_rss_mb": base.tolist(), "min_rss_mb": series.min(0).tolist(),
            "max_rss_mb": series.max(0).tolist(), "largest_move": round(move, 4)}


def replace_section(path: Path, title: str, text: str) -> None:
    """Put `text` (starting with `## title`) in place of that section of `path`, or at its end."""
    old = path.read_text() if path.exists() else ""
    start = old.find(f"\n## {title}\n")
    if start >= 0:
        end = old.find("\n## ", start + 1)
        old = old[:start] + (old[end:] if end >= 0 else "\n")
    path.write_text(old.rstrip("\n") + "\n\n" + text)


def soak(server: ServerUnderTest, minutes: float, clients: int, out: Path, server_args: str) -> int:
    """Run the soak against `server`, stop it, write the report; 0 when every check passed."""
    try:
        results, samples = asyncio.run(run(server, minutes, clients))
        metrics = urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10).read().decode()
    finally:
        code = server.stop()
    ended = [r for r in results if r["acked_s"] is not None]
    sent = sum(r["sent_s"] for r in ended)
    acked = sum(r["acked_s"] for r in ended)
    short = [r for r in ended if abs(r["acked_s"] - r["sent_s"]) > 0.001]
    errors = [e for r in results for e in r["errors"]]
    rss = flatness(samples, min(max(60.0, minutes * 6), minutes * 30))  # 10% of the time, 1 min at least
    passed = rss["flat"] and not short and not errors and code == 0
    result = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "minutes": minutes, "clients": clients,
              "server_args": server_args or "(defaults)", "sessions": len(results),
              "by_mode": {m: sum(r["mode"] == m for r in results) for m in ("end", "close", "drop", "connect")},
              "audio_sent_s": round(sum(r["sent_s"] for r in results), 1), "ended_sent_s": round(sent, 3),
              "ended_acked_s": round(acked, 3), "sessions_short": len(short), "error_events": len(errors),
              "first_errors": errors[:5], "rss": rss, "server_exit": code, "passed": passed,
              "server_errors_metric": [line for line in metrics.splitlines() if line.startswith("asr_errors_total")],
              "rss_samples": samples}
    out.mkdir(parents=True, exist_ok=True)
    (out / "serve_soak.json").write_text(json.dumps(result, indent=1) + "\n")
    text = (f"## Soak\n\n`python scripts/bench/serve.py --soak {minutes:g} --soak-clients {clients}` ({result['date']}; "
            f"server: {result['server_args']}): {len(results)} sessions ({result['by_mode']['end']} ended properly, "
            f"{result['by_mode']['close']} closed and {result['by_mode']['drop']} dropped part-way), "
            f"{result['audio_sent_s'] / 3600:.2f} h of audio. Audio acknowledged / sent by the sessions that ended "
            f"properly: {acked:.1f} / {sent:.1f} s ({len(short)} short). Error events: {len(errors)}. RSS per worker "
            f"after the warm-up: {rss.get('warmup_rss_mb')} MB, then {rss.get('min_rss_mb')} to {rss.get('max_rss_mb')} "
            f"MB (largest move {rss.get('largest_move', '-')}; flat within 10%: {rss['flat']}). Server exit status after "
            f"SIGTERM: {code}. **{'Passed' if passed else 'Failed'}.**\n")
    replace_section(out / "serve.md", "Soak", text)
    print(text)
    return 0 if passed else 1
