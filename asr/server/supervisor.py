"""`asr.serve --workers N`: N serving processes behind one port, and the process that looks after them.

Each worker (`asr.server.worker.run_worker`, started with multiprocessing's spawn) loads its own model,
batches its own streams and listens on the same port with SO_REUSEPORT, so the kernel spreads the
connections over them and every core has a process of its own (one process cannot use more than
about one core: the per-stream decoding holds the GIL). The supervisor holds the port while the workers
load, all of them side by side (a bound socket that does not listen takes no connections; it also finds a free
port for `--port 0`), says "ready ... listening" once every worker is, with how long each took, forwards SIGTERM/SIGINT to the workers (each then
finishes its open streams), starts a new worker when one dies unexpectedly, and exits 0 once every
worker has stopped cleanly. Metrics are shared through a fresh PROMETHEUS_MULTIPROC_DIR. Since SO_REUSEPORT
would let a second server's sockets join the first's, `claim_port` refuses a port that is already served.
"""
from __future__ import annotations

import argparse
import errno
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from contextlib import contextmanager
from multiprocessing.connection import wait
from typing import Iterator

from asr.server.metrics import MULTIPROC_ENV

log = logging.getLogger("asr.serve")
START_TIMEOUT = 600.0  # seconds for every worker to load its model and listen
MAX_RESTARTS = 20  # workers started again after dying unexpectedly, over the supervisor's life


class StartError(Exception):
    """A worker could not start (its model, the port); the message says why."""


@contextmanager
def claim_port(host: str, port: int) -> Iterator[None]:
    """Refuse a port that another server holds, whatever its workers, before any model loads; keep it from other
    `asr.serve`s while this one runs. OSError (EADDRINUSE, its strerror saying why) if a process listens there
    (a probe bound without SO_REUSEPORT conflicts with every listener) or, on Linux, another `asr.serve` holds
    the lock (an abstract Unix socket named after the address: it covers the time its workers load, when the
    port is bound but not listening). Port 0 needs no claim: the kernel picks a port that no socket holds."""
    if port == 0:
        yield
        return
    family, kind, proto, _, address = _address(host, port)
    with socket.socket(family, kind, proto) as probe, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as lock:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a previous server's TIME_WAIT is no conflict
        try:
            probe.bind(address)
            probe.close()
            if sys.platform.startswith("linux"):
                lock.bind(f"\0asr.serve:{address[0]}:{port}")
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                raise OSError(err.errno, "another process is already serving that port (another asr.serve?); "
                                         "stop it or choose another --port") from None
            raise
        yield


def _address(host: str, port: int) -> tuple:
    """getaddrinfo's first answer for a listening TCP socket on (host, port)."""
    return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]


def hold_port(host: str, port: int) -> socket.socket:
    """A socket bound to (host, port) with SO_REUSEPORT but not listening: it keeps the port for the workers
    and picks one for port 0. OSError if the port is taken by a process that did not set SO_REUSEPORT."""
    family, kind, proto, _, address = _address(host, port)
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


class Supervisor:
    """Starts, watches and stops the workers of one `asr.serve` command."""

    def __init__(self, args: argparse.Namespace, workers: int):
        self.args, self.count = args, workers
        self.context = multiprocessing.get_context("spawn")
        self.procs: dict[int, multiprocessing.process.BaseProcess] = {}
        self.stopping, self.stopped_at = False, 0.0
        self.restarts = 0
        self.loaded: dict[int, tuple[float, float]] = {}  # worker -> (time.time() it began, and it listened)

    def _spawn(self, index: int, port: int) -> multiprocessing.connection.Connection:
        from asr.server.worker import run_worker  # noqa: PLC0415 (the app and aiohttp: not to check the options)
        ours, theirs = self.context.Pipe(duplex=False)
        proc = self.context.Process(target=run_worker, args=(self.args, index, port, theirs), name=f"asr-serve-{index}")
        proc.start()
        theirs.close()
        self.procs[index] = proc
        return ours

    def _await_ready(self, pipes: dict[int, multiprocessing.connection.Connection]) -> None:
        """Every worker in `pipes` listening (they load side by side: each was started before any is awaited),
        else StartError (the first reason a worker gave)."""
        deadline = time.monotonic() + START_TIMEOUT
        waiting = dict(pipes)
        while waiting:
            if self.stopping:
                raise StartError("stopped while starting")
            left = deadline - time.monotonic()
            if left <= 0:
                raise StartError(f"the workers did not start within {START_TIMEOUT:g} s")
            for index, pipe in list(waiting.items()):
                if pipe.poll():
                    try:
                        kind, detail = pipe.recv()
                    except EOFError:
                        kind, detail = "error", f"worker {index} exited while starting"
                    if kind == "error":
                        raise StartError(detail)
                    self.loaded[index] = detail
                    del waiting[index]
                elif not self.procs[index].is_alive():
                    raise StartError(f"worker {index} exited while starting (code {self.procs[index].exitcode})")
            wait([*waiting.values()], timeout=min(0.5, max(left, 0.01)))
        for pipe in pipes.values():
            pipe.close()

    def _signal(self, *_) -> None:
        if not self.stopping:
            self.stopping, self.stopped_at = True, time.monotonic()
        for proc in self.procs.values():
            if proc.is_alive() and proc.pid is not None:
                os.kill(proc.pid, signal.SIGTERM)

    def load_times(self) -> dict:
        """How the workers loaded: `loaded_s`, each one's seconds from its start to listening, and `loading_s`, from
        the first one's start to the last one listening (about the slowest one's, as they load side by side)."""
        if not self.loaded:
            return {}
        spans = [self.loaded[i] for i in sorted(self.loaded)]
        return {"loaded_s": [round(ready - began, 1) for began, ready in spans],
                "loading_s": round(max(r for _, r in spans) - min(b for b, _ in spans), 1)}

    def run(self, listening) -> int:
        """Start the workers, call `listening(port)`, watch them until stopped; the exit status."""
        metrics_dir = tempfile.mkdtemp(prefix="asr-serve-metrics-")
        os.environ[MULTIPROC_ENV] = metrics_dir  # before the workers start: they read it at import
        previous = {sig: signal.signal(sig, self._signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            holder = hold_port(self.args.host, self.args.port)
            port = holder.getsockname()[1]
            try:
                self._await_ready({i: self._spawn(i, port) for i in range(self.count)})
            finally:
                holder.close()
            listening(port)
            return self._watch(port)
        except StartError:
            self._signal()
            self._join(10.0)
            raise
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            os.environ.pop(MULTIPROC_ENV, None)
            shutil.rmtree(metrics_dir, ignore_errors=True)

    def _watch(self, port: int) -> int:
        """Until every worker has stopped: replace those that die unexpectedly. 0 if all stopped cleanly."""
        from prometheus_client import multiprocess

        from asr.server.worker import STOP_TIMEOUT  # noqa: PLC0415
        codes: dict[int, int] = {}
        while len(codes) < len(self.procs):
            wait([p.sentinel for i, p in self.procs.items() if i not in codes], timeout=1.0)
            if self.stopping and time.monotonic() > self.stopped_at + STOP_TIMEOUT + 15:
                log.error("workers still running %g s after the stop; killing them", STOP_TIMEOUT + 15)
                self._join(0.0)
            for index, proc in list(self.procs.items()):
                if index in codes or proc.is_alive():
                    continue
                proc.join()
                multiprocess.mark_process_dead(proc.pid)
                if self.stopping or self.restarts >= MAX_RESTARTS:
                    codes[index] = proc.exitcode
                    continue
                self.restarts += 1
                log.warning("worker %d exited unexpectedly (code %s); starting another", index, proc.exitcode)
                try:
                    self._await_ready({index: self._spawn(index, port)})
                except StartError as err:
                    log.error("worker %d could not be restarted: %s", index, err)
                    codes[index] = 1
        return 0 if all(code == 0 for code in codes.values()) else 1

    def _join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for proc in self.procs.values():
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(5)
