"""No surprises in a new user's first hour: a port already served is refused whatever the workers, a missing
torch is one error line, a closed output pipe ends `asr.stream` quietly, and a client rebuilds each segment's
text from an event's `keep` and `new` even when the search revises earlier words."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from urllib.request import urlopen

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import asr
from asr.audio.chunks import rechunk
from asr.audio.files import read_blocks
from asr.decoding.endpoint import EndpointConfig, Segmenter
from asr.server.supervisor import claim_port, hold_port
from conftest import run_module
from test_onnx_runtime import NO_TORCH
from test_serve import EXAMPLES, ROOT, ServerProcess


def one_error_line(result: subprocess.CompletedProcess, tool: str) -> str:
    """The single `asr.TOOL: error: ...` line of a command that failed with exit status 1."""
    assert result.returncode == 1, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"asr.{tool}: error: "), result.stderr
    return lines[0]


def test_a_second_serve_on_a_served_port_is_refused_whatever_the_workers():
    first = ServerProcess("--greedy", "--workers", "2")
    try:
        for workers in ("2", "1"):  # with SO_REUSEPORT, a second --workers 2 used to join the first's workers
            line = one_error_line(run_module("asr.serve", "--port", str(first.port), "--workers", workers, "--greedy",
                                             timeout=60), "serve")
            assert f":{first.port}" in line and "already serving" in line, line
        with urlopen(f"http://127.0.0.1:{first.port}/healthz", timeout=10) as health:
            assert health.status == 200  # the first serves on
    finally:
        first.stop()
    assert first.proc.returncode == 0


def test_a_serve_still_loading_its_workers_holds_its_port():
    """While a serve's workers load, its port is bound but not listening; a second serve is refused then too."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with claim_port("127.0.0.1", port), hold_port("127.0.0.1", port):  # what a serve holds while it starts
        line = one_error_line(run_module("asr.serve", "--port", str(port), "--workers", "2", "--greedy", timeout=60),
                              "serve")
    assert "already serving" in line, line


def test_without_torch_the_torch_backend_and_export_are_one_error_line(tmp_path: Path):
    restorer = ROOT / "asr" / "pretrained" / "restorer.safetensors"
    commands = [("serve", ["--backend", "torch", "--workers", "1", "--port", "0"]),
                ("transcribe", [str(EXAMPLES / "synthetic_slt.flac"), "--backend", "torch"]),
                ("transcribe", [str(EXAMPLES / "synthetic_slt.flac"), "--restorer", str(restorer)]),
                ("export", ["--onnx", str(tmp_path / "export")])]
    for tool, args in commands:
        result = subprocess.run([sys.executable, "-c", NO_TORCH, f"asr.{tool}", *args], cwd=ROOT, capture_output=True,
                                text=True, timeout=120)
        line = one_error_line(result, tool)
        assert "pip install 'asr[train]'" in line and "'torch'" in line, line


def test_stream_json_into_a_closed_pipe_ends_quietly():
    """`python -m asr.stream --json | head -1`: the reader goes away after its line. Here it is gone before the
    first, so that the write fails every time (head leaves a race: the whole output may fit in the pipe)."""
    read, write = os.pipe()
    os.close(read)
    try:
        result = subprocess.run([sys.executable, "-m", "asr.stream", "--file", str(EXAMPLES / "synthetic_slt.flac"),
                                 "--json", "--greedy"], cwd=ROOT, stdout=write, stderr=subprocess.PIPE, text=True,
                                timeout=120)
    finally:
        os.close(write)
    assert result.stderr == "" and result.returncode == 0, result.stderr


def rebuild(events: list[dict]) -> int:
    """Apply the events as a client does, `text = previous[:keep] + new` per segment, checking each against
    its `text` and that `keep` is the longest prefix kept; the number of revisions (keep < previous length)."""
    shown: dict[int, str] = {}
    revisions = 0
    for event in events:
        previous, keep = shown.get(event["segment"], ""), event["keep"]
        assert 0 <= keep <= len(previous) and previous[:keep] + event["new"] == event["text"], (previous, event)
        assert keep == min(len(previous), len(event["text"])) or previous[keep] != event["text"][keep], (previous, event)
        revisions += keep < len(previous)
        shown[event["segment"]] = event["text"]
    return revisions


class ScriptedDecoder:
    """Stands in for a Decoder: the k-th segment's search shows `partials[k][i]` after its i-th push and
    finishes as `finals[k]`, restored (upper case -> title case) if `restore`; tokens are the texts themselves."""

    kind = "greedy"  # no word LM judges the pauses

    def __init__(self, segments: list[tuple[list[str], str]], restore: bool):
        self.segments, self.restoring = iter(segments), restore

    def search(self, start: int, before=()) -> "ScriptedDecoder._Search":
        return self._Search(*next(self.segments, ([], "")))

    class _Search:
        def __init__(self, partials: list[str], final: str):
            self.partials, self.last, self.final_text = iter(partials), "", final

        def push(self, logprobs: np.ndarray) -> None:
            if logprobs.shape[0]:
                self.last = next(self.partials, self.last)

        def best(self) -> str:
            return self.last

        def final(self) -> str:
            return self.final_text

    def text(self, tokens: str) -> str:
        return tokens

    def finish(self, search: "ScriptedDecoder._Search", frame_seconds: float, *_) -> tuple[str, list]:
        return search.final(), []

    def restore(self, text: str, words: list | None = None, context=None, after: float = 0.0) -> str | None:
        return text.title() if self.restoring else None


texts = st.text(alphabet="AB '", max_size=8)
finals = st.text(alphabet="AB '", min_size=1, max_size=8)  # an empty final drops the segment (then keep starts at 0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.lists(texts, max_size=6), finals), min_size=1, max_size=4), st.booleans())
def test_keep_and_new_rebuild_every_text_through_revisions(segments: list[tuple[list[str], str]], restore: bool):
    segmenter = Segmenter(ScriptedDecoder(segments, restore), 0.04,
                          EndpointConfig(silence_no_speech=1e6, max_segment=1e6))  # segments end at `finish` only
    blank = np.array([[0.0, -20.0, -20.0, -20.0]], np.float32)  # one frame, blank certain: no endpoint fires
    events = []
    for partials, _ in segments:
        for _ in partials:
            events += [e.to_json() for e in segmenter.push(blank, 0.0)]
        events += [e.to_json() for e in segmenter.finish(0.0)]
    rebuild(events)


def test_the_bundled_stream_rebuilds_through_its_restored_final():
    """The real search's events rebuild as a client applies them; the restored final rewrites what the partials
    showed (their case), a revision. Partials that rewrite earlier words are the property test's above: whether
    the bundled search does so on this clip depends on the model (the default of 2026-12-06 does not)."""
    model = asr.load()  # the default decoding: the word-LM beam search, restored finals
    events = [e.to_json() for e in model.emissions(rechunk(read_blocks(EXAMPLES / "speechocean762_0813_0233.flac"), 8000))]
    assert len(events) >= 3 and rebuild(events) >= 1, events
    partials, final = events[:-1], events[-1]
    assert final["is_final"] and final["text"] != final["text"].upper(), final  # restored: cased, punctuated
    assert all(not e["is_final"] and e["text"] == e["text"].upper() for e in partials), partials  # the search's words
