"""A training loader process's start (asr.training.acoustic.datamodule.start_loader_process): a Ctrl-C that ends the
main process mid-batch leaves no traceback from the loader's resource sharer, and every other error still shows."""
from __future__ import annotations

import sys
import threading

import pytest

from asr.training.acoustic.datamodule import start_loader_process


def raised_in(filename: str, error: type[BaseException]) -> tuple:
    """(type, value, traceback) of `error` raised by code that says it lives in `filename`."""
    scope: dict = {}
    exec(compile(f"def serve():\n    raise {error.__name__}('reset')\n", filename, "exec"), scope)
    try:
        scope["serve"]()
    except BaseException:  # noqa: BLE001 (the test raises it to get its traceback)
        return sys.exc_info()
    raise AssertionError("serve() did not raise")


@pytest.fixture
def reported(monkeypatch):
    """What reached the hooks that were in place before the loader process started."""
    seen: list[str] = []
    monkeypatch.setattr(sys, "excepthook", lambda kind, value, tb: seen.append(f"sys {kind.__name__}"))
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(f"thread {args.exc_type.__name__}"))
    start_loader_process(0)
    return seen


SHARER = "/usr/lib/python3/multiprocessing/resource_sharer.py"


def test_the_resource_sharers_connection_reset_is_quiet_through_either_hook(reported):
    sys.excepthook(*raised_in(SHARER, ConnectionResetError))  # how resource_sharer._serve reports
    kind, value, tb = raised_in(SHARER, EOFError)
    threading.excepthook(threading.ExceptHookArgs((kind, value, tb, None)))
    assert reported == []


def test_other_errors_still_reach_the_hooks(reported):
    sys.excepthook(*raised_in("/work/train.py", ConnectionResetError))  # a reset elsewhere is an error
    sys.excepthook(*raised_in(SHARER, ValueError))  # and so is any other error of the sharer
    kind, value, tb = raised_in("/work/train.py", RuntimeError)
    threading.excepthook(threading.ExceptHookArgs((kind, value, tb, None)))
    assert reported == ["sys ConnectionResetError", "sys ValueError", "thread RuntimeError"]
