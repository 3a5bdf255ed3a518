"""Ctrl-C in the command-line tools: one line on stderr, what is finished kept, exit status 130.

    @interrupt.handled("transcribe")             # Ctrl-C stops the tool where it is
    @interrupt.handled("stream", finish=True)    # Ctrl-C ends the input; the tool finishes what it heard

Without it, Ctrl-C printed a KeyboardInterrupt traceback (one per --jobs worker too) and the exit status
was -2; on standard input PyAV swallowed it in its read callback ("Exception ignored ..."), took the cut as
the end of the input and exited 0. Here the tool's `main` runs with a SIGINT handler of its own:

- it sets `STOP`, which the readers of asr.audio check: a pipe (standard input) gives end-of-input at once, a
  file at its next block. With `finish` that is all the first Ctrl-C does, so asr.stream steps what it has read,
  closes the open segment and prints its final, then says it was interrupted;
- otherwise (and at a second Ctrl-C) it raises KeyboardInterrupt, which ends the tool where it is; what it
  had written (the files transcribed so far) stays, stdout is flushed, and a `--jobs` worker, which ignores
  SIGINT (`ignore_in_worker`), is stopped by its pool.

Either way the tool then prints `asr.TOOL: interrupted (Ctrl-C)` and exits 130 (128 + SIGINT, what a shell
reports for a command that Ctrl-C stopped).
"""
from __future__ import annotations

import functools
import signal
import sys
import threading
from typing import Callable

STOP = threading.Event()  # set at Ctrl-C while a tool runs: the readers end their input
EXIT_STATUS = 130


def handled(tool: str, finish: bool = False) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """A tool's `main` that ends on Ctrl-C with one line and EXIT_STATUS (see the module's docstring).
    `finish`: the first Ctrl-C only ends the input (asr.stream), the second stops at once."""
    def wrap(main: Callable[..., int]) -> Callable[..., int]:
        @functools.wraps(main)
        def run(*args, **kwargs) -> int:
            if threading.current_thread() is not threading.main_thread():  # only the main thread takes signals
                return main(*args, **kwargs)

            def on_ctrl_c(signum: int, frame: object) -> None:
                again = STOP.is_set()
                STOP.set()
                if again or not finish:
                    raise KeyboardInterrupt

            STOP.clear()
            previous = signal.signal(signal.SIGINT, on_ctrl_c)
            try:
                code = main(*args, **kwargs)
                return _interrupted(tool) if STOP.is_set() else code
            except KeyboardInterrupt:
                return _interrupted(tool)
            finally:
                signal.signal(signal.SIGINT, previous)
                STOP.clear()
        return run
    return wrap


def _interrupted(tool: str) -> int:
    """What was printed so far flushed, then the one line; the exit status."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):  # a closed or broken stdout: nothing more to keep
        pass
    print(f"asr.{tool}: interrupted (Ctrl-C)", file=sys.stderr)
    return EXIT_STATUS


def ignore_in_worker() -> None:
    """In a worker process: leave Ctrl-C to the main process, which stops the pool."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
