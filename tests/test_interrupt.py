"""Ctrl-C: every tool ends with one line on stderr, what it finished kept (asr.stream: the open segment's final
too), exit status 130. Each tool runs in a session of its own and Ctrl-C goes to the whole group, as a terminal
sends it (--jobs workers included). Nothing here waits a set time: the signal comes once the tool is seen to be
blocked where the test wants it (reading a pipe or a FIFO the test holds) or to have printed what the test needs."""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from helpers import ROOT

EXAMPLE = ROOT / "asr" / "examples" / "synthetic_slt.flac"
INTERRUPTED = "interrupted (Ctrl-C)"


def start(module: str, *args: str, stdin=subprocess.DEVNULL) -> subprocess.Popen:
    """`python -m module args` in a session of its own (greedy: fast), output captured."""
    return subprocess.Popen([sys.executable, "-m", module, *args, "--greedy"], cwd=ROOT, stdin=stdin,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def ctrl_c(process: subprocess.Popen) -> tuple[int, str, list[str]]:
    """SIGINT to the process's group, as a terminal's Ctrl-C; then (exit status, stdout, stderr lines)."""
    os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=120)
    return process.returncode, out.decode(), err.decode().splitlines()


@pytest.fixture(scope="module")
def long_wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ten minutes of the example over and over: seconds of work, whatever the machine."""
    wave, rate = sf.read(EXAMPLE, dtype="float32")
    path = tmp_path_factory.mktemp("long") / "long.wav"
    sf.write(path, np.tile(wave, round(600 * rate / wave.size)), rate, subtype="PCM_16")
    return path


def wait_until_reading(path: Path, process: subprocess.Popen) -> None:
    """Block until the tool or one of its workers has `path` open: it is working on it."""
    while str(path) not in _open_files(process.pid):
        if process.poll() is not None:
            raise AssertionError(f"exited {process.returncode} before reading {path}: {process.stderr.read().decode()}")
        os.sched_yield()


def _open_files(pid: int) -> set[str]:
    """The files open in process `pid` and its descendants."""
    found, family = set(), [pid]
    while family:
        pid = family.pop()
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                family += map(int, Path(f"/proc/{pid}/task/{task}/children").read_text().split())
            for fd in os.listdir(f"/proc/{pid}/fd"):
                found.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:  # gone meanwhile
            continue
    return found


def wav_bytes(samples: np.ndarray, rate: int) -> tuple[bytes, int]:
    """A 16-bit WAV of `samples` and the size of its header."""
    buffer = io.BytesIO()
    sf.write(buffer, samples, rate, format="WAV", subtype="PCM_16")
    data = buffer.getvalue()
    return data, len(data) - 2 * samples.size


@pytest.mark.parametrize("batched", [True, False])
def test_transcribe_keeps_the_finished_files(batched: bool, long_wav: Path) -> None:
    tool = start("asr.transcribe", str(EXAMPLE), str(long_wav), *([] if batched else ["--batch-seconds", "0"]))
    first = tool.stdout.readline().decode()
    wait_until_reading(long_wav, tool)
    code, out, err = ctrl_c(tool)
    assert (code, err) == (130, [f"asr.transcribe: {INTERRUPTED}"])
    assert first.startswith(f"{EXAMPLE}\t") and out == "", (first, out)


def test_transcribe_with_jobs_stops_its_workers_quietly(tmp_path: Path, long_wav: Path) -> None:
    tool = start("asr.transcribe", *[str(EXAMPLE)] * 40, str(long_wav), "--jobs", "2")
    wait_until_reading(long_wav, tool)
    code, out, err = ctrl_c(tool)
    assert (code, err) == (130, [f"asr.transcribe: {INTERRUPTED}"])  # no worker's traceback either
    assert all(line.startswith(f"{EXAMPLE}\t") for line in out.splitlines())


def test_transcribe_of_standard_input(tmp_path: Path) -> None:
    wave, rate = sf.read(EXAMPLE, dtype="float32")
    data, _ = wav_bytes(np.concatenate([wave] * 8), rate)
    tool = start("asr.transcribe", "-", stdin=subprocess.PIPE)
    tool.stdin.write(data[:len(data) // 2])  # more than a pipe holds: returns once the tool is reading
    tool.stdin.flush()
    code, out, err = ctrl_c(tool)
    tool.stdin.close()
    assert (code, out, err) == (130, "", [f"asr.transcribe: {INTERRUPTED}"])


def test_stream_of_standard_input_flushes_what_it_heard(tmp_path: Path) -> None:
    """The finals of the audio that arrived before Ctrl-C, the open segment's included: those of a file holding
    just that audio."""
    wave, rate = sf.read(EXAMPLE, dtype="float32")
    gap = np.zeros(rate, np.float32)  # a pause that ends a segment whatever the model's lookahead chunk holds
    pcm = np.round(np.concatenate([wave, gap, wave]) * 32767).astype(np.int16)
    data, header = wav_bytes(pcm, rate)
    heard = pcm[: pcm.size * 3 // 4]  # the first copy, the pause and half the second
    tool = start("asr.stream", "--file", "-", "--json", stdin=subprocess.PIPE)
    tool.stdin.write(data[: header + 2 * heard.size])
    tool.stdin.flush()
    chunks = heard.size // 8000  # every whole 500 ms chunk stepped: the rest waits for more audio
    lines = []
    while not lines or json.loads(lines[-1])["time"] < chunks * 0.5:
        lines.append(tool.stdout.readline().decode())
        assert lines[-1], tool.stderr.read().decode()
    code, out, err = ctrl_c(tool)
    tool.stdin.close()
    events = [json.loads(line) for line in lines + out.splitlines()]
    assert (code, err) == (130, [f"asr.stream: {INTERRUPTED}"])
    sf.write(tmp_path / "heard.wav", heard, rate, subtype="PCM_16")
    run = subprocess.run([sys.executable, "-m", "asr.stream", "--file", str(tmp_path / "heard.wav"), "--json",
                          "--greedy"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    expected = [json.loads(line) for line in run.stdout.splitlines()]
    finals = [e["text"] for e in events if e["is_final"]]
    assert len(finals) == 2 and finals == [e["text"] for e in expected if e["is_final"]]


def test_stream_of_a_file_ends_with_the_open_segments_final(tmp_path: Path) -> None:
    wave, rate = sf.read(EXAMPLE, dtype="float32")
    long = tmp_path / "long.wav"
    sf.write(long, np.concatenate([wave] * 20), rate)
    tool = start("asr.stream", "--file", str(long), "--json", "--realtime")
    first = json.loads(tool.stdout.readline())
    while not first["is_final"]:
        first = json.loads(tool.stdout.readline())
    code, out, err = ctrl_c(tool)
    events = [json.loads(line) for line in out.splitlines()]
    assert (code, err) == (130, [f"asr.stream: {INTERRUPTED}"])
    assert events and events[-1]["is_final"] and events[-1]["time"] < 20 * wave.size / rate / 2


def test_evaluate(tmp_path: Path, long_wav: Path) -> None:
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio": str(long_wav), "text": "a"}) + "\n")
    tool = start("asr.evaluate", "--manifest", str(manifest))
    wait_until_reading(long_wav, tool)
    code, out, err = ctrl_c(tool)
    assert (code, out, err) == (130, "", [f"asr.evaluate: {INTERRUPTED}"])


@pytest.mark.parametrize("module", ["asr.transcribe", "asr.stream"])
def test_the_tools_wait_for_nothing_after_a_normal_run(module: str) -> None:
    """The handler is the tool's only while it runs: a run that is not interrupted ends 0, saying nothing."""
    args = [str(EXAMPLE)] if module == "asr.transcribe" else ["--file", str(EXAMPLE)]
    run = subprocess.run([sys.executable, "-m", module, *args, "--greedy"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0 and run.stderr == "" and run.stdout.strip()
