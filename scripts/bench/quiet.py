"""The load guard every benchmark that writes committed figures runs first: the figures in benchmarks/ are
measured with nothing else on the machine.

    quiet.add_allow_load(parser)                    # --allow-load
    load = quiet.guard(args.allow_load, args.out)   # the 1-minute load at the start, recorded beside the figures

`guard` refuses, with one line and exit status 2, to write into the committed folder (benchmarks/) when the
1-minute load average is above `MAX_LOAD`, unless told to (`--allow-load`: then the figures carry the load
they were measured at). Other folders (a smoke run's) are never refused.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

COMMITTED = Path(__file__).resolve().parents[2] / "benchmarks"  # the figures RESULTS.md and the README quote
MAX_LOAD = 0.5  # the 1-minute load average above which a machine is not quiet


def add_allow_load(parser: argparse.ArgumentParser) -> None:
    """--allow-load: write the figures even on a busy machine."""
    parser.add_argument("--allow-load", action="store_true",
                        help=f"write the figures even when the 1-minute load is above {MAX_LOAD} at the start "
                             "(they then record it; the committed figures are measured on a quiet machine)")


def load_now() -> float:
    """The 1-minute load average."""
    return round(os.getloadavg()[0], 2)


def guard(allow_load: bool, out: Path, tool: str = "benchmark") -> float:
    """The load at the start; exits with one line (status 2) above MAX_LOAD when the figures go to `out` in
    benchmarks/ (the folder or a file in it), unless `allow_load`."""
    load = load_now()
    out = Path(out).resolve()
    if load > MAX_LOAD and not allow_load and COMMITTED in (out, *out.parents):
        print(f"{tool}: error: the 1-minute load is {load} (> {MAX_LOAD}): the machine is not quiet, so no figures "
              "are written; wait for it, or pass --allow-load to write them anyway (they record the load)",
              file=sys.stderr)
        sys.exit(2)
    return load
