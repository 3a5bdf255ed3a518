"""`python -m asr.serve --port 0` under a benchmark: started, watched through /proc, stopped.

The server may be one process or a supervisor with N worker processes (`--workers`); CPU time is
summed over all of them, and RSS is read per worker (the supervisor's own is small and reported apart).
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from urllib.request import urlopen

ROOT = Path(__file__).resolve().parents[2]


def proc_rss_mb(pid: int, key: str = "VmRSS") -> float:
    """A process's resident set size (or `key`, e.g. VmHWM) in MB; NaN once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The child processes of `pid` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return sorted(found)


class ServerUnderTest:
    """The server command, its port, and the pids of the processes that serve (the workers, or itself)."""

    def __init__(self, args: list[str], start_timeout: float = 600.0):
        self.proc = subprocess.Popen([sys.executable, "-m", "asr.serve", "--port", "0", "--max-streams", "1000", *args],
                                     cwd=ROOT, stderr=subprocess.PIPE, text=True)
        self.log: list[str] = []
        first: list[str] = []
        reader = threading.Thread(target=lambda: first.append(self.proc.stderr.readline()), daemon=True)
        reader.start()
        reader.join(start_timeout)
        match = re.search(r"127\.0\.0\.1:(\d+)/", first[0] if first else "")
        if not match:
            self.stop()
            raise RuntimeError(f"asr.serve did not start: {(first or ['(nothing within the time limit)'])[0].strip()}")
        self.port = int(match.group(1))
        # drained so that the server never blocks on a full pipe; the last lines are kept for errors
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        for line in self.proc.stderr:
            self.log = (self.log + [line])[-200:]

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/asr"

    def metric(self, name: str) -> float:
        """One sample of GET /metrics (summed over the workers), e.g. asr_batch_rows_sum; nan if absent."""
        with urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as response:
            for line in response.read().decode().splitlines():
                if line.split(" ")[0] == name:
                    return float(line.split(" ")[1])
        return float("nan")

    def workers(self) -> list[int]:
        """The pids that serve streams: the spawned workers, or the command itself when it has none."""
        spawned = []
        for pid in children(self.proc.pid):
            try:
                if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    spawned.append(pid)
            except OSError:
                continue
        return spawned or [self.proc.pid]

    def cpu_seconds(self) -> float:
        """CPU seconds of the command and everything it started."""
        return sum(proc_cpu_seconds(pid) for pid in [self.proc.pid, *children(self.proc.pid)])

    def rss_mb(self, key: str = "VmRSS") -> list[float]:
        """RSS (or `key`) of each worker, in MB."""
        return [round(proc_rss_mb(pid, key), 1) for pid in self.workers()]

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM (open streams get their finals), then the exit status; killed if it does not exit."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode
