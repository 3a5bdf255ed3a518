"""Transcription time on an idle machine and under CPU load, by thread count.

    python scripts/bench/load.py [--seconds 126] [--out benchmarks/transcribe]

Runs `python -m asr.transcribe` (fresh process, model and LM load included) on the shipped examples
looped to `--seconds` of audio: idle, then beside one busy-looping process per core (what a machine
running other work looks like), with --threads 1 (the default) and 2. Prints a markdown table and
writes OUT/load.md and OUT/load.json.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from asr.audio import SAMPLE_RATE  # noqa: E402
from asr.audio.files import load_audio


def _spin(stop: mp.Event) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def transcribe_seconds(audio: Path, threads: int) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "asr.transcribe", str(audio), "--threads", str(threads)],
                   check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=126.0)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "transcribe")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: bench.quiet, the load guard
    from bench import quiet  # noqa: PLC0415
    args = quiet.parse_guarded(parser, argv, "load")  # committed figures: only on a quiet machine
    examples = [load_audio(p) for p in sorted((ROOT / "asr" / "examples").glob("*.flac"))]
    wave = np.concatenate(examples * (int(args.seconds * SAMPLE_RATE) // sum(map(len, examples)) + 1))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        audio = Path(tmp) / "long.wav"
        sf.write(audio, wave[: int(args.seconds * SAMPLE_RATE)], SAMPLE_RATE)
        for threads in (1, 2):
            idle = transcribe_seconds(audio, threads)
            stop = mp.Event()
            hogs = [mp.Process(target=_spin, args=(stop,), daemon=True) for _ in range(os.cpu_count() or 1)]
            for hog in hogs:
                hog.start()
            try:
                loaded = transcribe_seconds(audio, threads)
            finally:
                stop.set()
                for hog in hogs:
                    hog.join(timeout=10)
            rows.append({"threads": threads, "idle_s": idle, "loaded_s": loaded, "slowdown": loaded / idle})
    table = ["| --threads | idle (s) | under load (s) | slowdown |", "|---:|---:|---:|---:|"]
    table += [f"| {r['threads']} | {r['idle_s']:.1f} | {r['loaded_s']:.1f} | {r['slowdown']:.1f}x |" for r in rows]
    text = (f"`python -m asr.transcribe` on {args.seconds:g} s of audio (model and LM load included), idle and beside "
            f"{os.cpu_count()} busy-looping processes; {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores.\n\n"
            + "\n".join(table) + "\n")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "load.md").write_text(text)
    (args.out / "load.json").write_text(json.dumps({"seconds": args.seconds, "rows": rows}, indent=1) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
