"""The peak RSS and the CPU time of `python -m MODULE ARGS` in a fresh process: its own and those of the worker
processes it waited for, whatever process started it.

    cmd = peak.command(report, "asr.transcribe", "a.wav")   # run it as you like (subprocess.Popen, run...)
    megabytes = peak.read_mb(report)                         # after it has exited
    seconds = peak.read_cpu_s(report)                        # CPU-seconds (user + system) of it and its workers

os.wait4's ru_maxrss cannot be used from a large process: Linux carries the peak of the process that started a
child across exec, so every child of a benchmark that loaded torch would report the benchmark's 1.5 GB. Each run
therefore reports for itself at exit: its own VmHWM (which exec resets) and its waited-for children's ru_maxrss
(forked from it, so their peak counts the pages they share with it).
"""
from __future__ import annotations

import sys
from pathlib import Path

_LAUNCHER = ("import atexit, resource, runpy, sys\n"
             "report = sys.argv.pop(1)\n"
             "def usage():\n"
             "    own = next(l for l in open('/proc/self/status') if l.startswith('VmHWM:')).split()[1]\n"
             "    mine, theirs = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))\n"
             "    cpu = mine.ru_utime + mine.ru_stime + theirs.ru_utime + theirs.ru_stime\n"
             "    open(report, 'w').write(f'{max(int(own), theirs.ru_maxrss)} {cpu:.3f}')\n"
             "atexit.register(usage)\n"  # registered first, so it runs last: after multiprocessing joins its workers
             "sys.argv = sys.argv[1:]\n"
             "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n")


def command(report: Path, module: str, *args: str) -> list[str]:
    """The command line that runs `python -m module args` and writes its peak RSS (kB) and CPU-seconds to `report`
    at exit."""
    return [sys.executable, "-c", _LAUNCHER, str(report), module, *args]


def read_mb(report: Path) -> float:
    """The peak RSS in MB that a run of `command` wrote."""
    return int(Path(report).read_text().split()[0]) / 1024


def read_cpu_s(report: Path) -> float:
    """The CPU-seconds (user + system) that a run of `command` and the workers it waited for spent."""
    return float(Path(report).read_text().split()[1])
