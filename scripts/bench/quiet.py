"""The load guard every benchmark that writes committed figures runs first: the figures in benchmarks/ are
measured with nothing else on the machine.

    args = quiet.parse_guarded(parser, argv, "tool")  # adds --allow-load, then guards args.out
    args.load                                         # the 1-minute load at the start, recorded beside the figures
    quiet.write_page(args.out, "tool", lines)         # the Markdown page, written and printed

`machine()` names the processor the figures come from and measures its speed: machines that describe themselves alike
("2 cores of AMD EPYC") have differed by up to 3x from one day to the next, so every figure carries both.

`guard` refuses, with one line and exit status 2, to write into the committed folder (benchmarks/) when the
1-minute load average is above `MAX_LOAD`, unless told to (`--allow-load`: then the figures carry the load
they were measured at). Other folders (a smoke run's) are never refused.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
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


def machine() -> str:
    """The processor and its speed in one phrase, e.g. "2 cores of AMD EPYC at 2596 MHz, 123 GFLOP/s a core"
    (the name as training progress rows give it, `asr.training.hardware.cpu_name`; the speed: `matmul_gflops`)."""
    from asr.training.hardware import cpu_name, cpuinfo  # noqa: PLC0415

    cores = os.cpu_count() or 1
    try:
        mhz = float(cpuinfo("cpu MHz") or 0)
    except ValueError:
        mhz = 0.0
    return (f"{cores} cores of {cpu_name()}" + (f" at {mhz:.0f} MHz" if mhz else "")
            + f", {matmul_gflops():.0f} GFLOP/s a core")


def matmul_gflops(size: int = 256, seconds: float = 0.3) -> float:
    """float32 matrix products (size x size, the scale of the model's) per CPU-second of this process, in GFLOP:
    a core's speed where the model spends most of its time (CPU time, so a BLAS thread pool cannot inflate it)."""
    import numpy as np  # noqa: PLC0415

    a = np.random.default_rng(0).standard_normal((size, size), dtype=np.float32)
    a @ a  # warm
    products, began = 0, time.process_time()
    while (spent := time.process_time() - began) < seconds:
        for _ in range(20):
            a @ a
        products += 20
    return 2 * size ** 3 * products / spent / 1e9


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


def parse_guarded(parser: argparse.ArgumentParser, argv: list[str] | None, tool: str) -> argparse.Namespace:
    """`parser`'s arguments, --allow-load added, once `guard` has let them write to their --out: what a benchmark
    writing committed figures does first. `args.load` is the load at the start."""
    add_allow_load(parser)
    args = parser.parse_args(argv)
    args.load = guard(args.allow_load, args.out, tool)
    return args


def write_page(out: Path, name: str, lines: list[str]) -> None:
    """The Markdown page `name`.md of `lines` written into the folder `out` (made if missing), and printed."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.md").write_text("\n".join(lines))
    print("\n".join(lines))
