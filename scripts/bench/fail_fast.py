"""How long each tool takes to say that its input is missing, and how much memory it used to say it.

    python scripts/bench/fail_fast.py [--runs 3]

Runs every entry point with a file that is not there (`asr.transcribe missing.wav`, `asr.stream --file
missing.wav`, `asr.evaluate missing.jsonl`, `asr.serve --lm missing.arpa`, `asr.finetune missing/ --out ...`),
each --runs times in a fresh interpreter, and prints one line per tool: its exit status, the median wall time
from start to exit and the peak RSS. The inputs are checked before any model or word LM loads (asr/cli/checks.py),
so each should exit 1 in well under a second; before that check, `asr.transcribe missing.wav` took 6.2 s and
603 MB (the bundled model and its 206k-word LM loaded first).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def commands(missing: Path) -> dict[str, list[str]]:
    """Each tool's command line with an input that is not there."""
    return {"transcribe": ["asr.transcribe", str(missing / "missing.wav")],
            "stream": ["asr.stream", "--file", str(missing / "missing.wav")],
            "evaluate": ["asr.evaluate", str(missing / "missing.jsonl")],
            "serve": ["asr.serve", "--port", "0", "--lm", str(missing / "missing.arpa")],
            "finetune": ["asr.finetune", str(missing / "recordings"), "--out", str(missing / "out")]}


def timed(argv: list[str]) -> tuple[int, float, float]:
    """(exit status, wall seconds, peak RSS in MB) of `python -m ARGV` in this checkout."""
    began = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - began
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: keep Popen from waiting again
    return proc.returncode, wall, usage.ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="runs of each tool (the median is printed)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        for tool, command in commands(Path(folder)).items():
            runs = [timed(command) for _ in range(max(1, args.runs))]
            codes = sorted({code for code, _, _ in runs})
            print(f"asr.{tool}: exit {','.join(map(str, codes))}, {statistics.median(w for _, w, _ in runs):.2f} s, "
                  f"{max(m for _, _, m in runs):.0f} MB peak (median of {len(runs)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
