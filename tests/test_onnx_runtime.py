"""The torch-free runtime end to end: transcribe, stream and evaluate with --backend onnx give the
torch backend's text, never import torch, and install from the package without the training stack."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from helpers import DATA, ROOT

EXAMPLES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "asr" / "examples").glob("*.flac"))
DEV = DATA / "speechocean762" / "dev.jsonl"
NO_TORCH = ("import runpy, sys; sys.modules['torch'] = None; tool = sys.argv.pop(1); "
            "runpy.run_module(tool, run_name='__main__', alter_sys=True)")
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def run_tool(tool: str, *args: str, torch_free: bool = False, python: str = sys.executable,
             cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`python -m asr.TOOL ARGS`; torch_free: with `import torch` made to fail in that process."""
    prefix = ["-c", NO_TORCH, f"asr.{tool}"] if torch_free else ["-m", f"asr.{tool}"]
    return subprocess.run([python, *prefix, *args], cwd=cwd, capture_output=True, text=True, env=ENV, timeout=600)


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def rows(out: str, timing: str = "rtf") -> list[dict]:
    """JSON lines without their compute-time field."""
    return [{k: v for k, v in json.loads(line).items() if k != timing} for line in out.splitlines()]


@pytest.mark.parametrize("decoding", [["--greedy"], []])  # [] = the default beam search with the word LM
def test_transcribe_onnx_equals_torch_without_torch(decoding):
    assert len(EXAMPLES) >= 2
    expected = ok(run_tool("transcribe", *EXAMPLES, "--format", "json", "--backend", "torch", *decoding))
    got = ok(run_tool("transcribe", *EXAMPLES, "--format", "json", "--backend", "onnx", *decoding, torch_free=True))
    expected_rows, got_rows = rows(expected), rows(got)
    assert len(got_rows) == len(EXAMPLES) and all(row["text"] for row in got_rows)
    assert got_rows == expected_rows  # text, and every word with its times (so the same tokens and frames)


def test_stream_onnx_equals_torch_for_every_chunk_size():
    for chunk_ms in ("480", "500", "730"):  # the model looks ahead in 480 ms chunks: shorter steps are refused
        args = ("--file", EXAMPLES[-1], "--json", "--chunk-ms", chunk_ms, "--greedy")
        emitted = {}
        for backend in ("torch", "onnx"):
            out = ok(run_tool("stream", *args, "--backend", backend, torch_free=backend == "onnx"))
            emitted[backend] = rows(out, timing="compute_ms")
        assert emitted["onnx"] == emitted["torch"], chunk_ms
        assert any(row["is_final"] and row["text"] for row in emitted["onnx"])


@pytest.mark.skipif(not DEV.is_file(), reason="needs ../shared/data/speechocean762")
def test_evaluate_onnx_equals_torch(tmp_path):
    args = ("--manifest", str(DEV), "--limit", "4", "--beam", "--streaming", "--chunk-ms", "730")
    reports = {}
    for backend in ("torch", "onnx"):
        ok(run_tool("evaluate", *args, "--backend", backend, "--report", str(tmp_path / backend),
                    torch_free=backend == "onnx"))
        reports[backend] = json.loads((tmp_path / backend).read_text())
    hyps = {backend: [u["hyp"] for u in report["utterances"]] for backend, report in reports.items()}
    assert len(hyps["onnx"]) == 4 and any(hyps["onnx"]) and hyps["onnx"] == hyps["torch"]
    for key in ("wer", "cer", "substitutions", "insertions", "deletions"):
        assert reports["onnx"]["summary"][key] == reports["torch"]["summary"][key]


def test_the_default_backend_follows_the_model(tmp_path, monkeypatch):
    """The bundled model runs on its shipped export where onnxruntime is installed; a .safetensors file
    needs torch; an exported folder or graph needs onnxruntime; without onnxruntime, torch."""
    from asr.model.backend import default_backend
    from asr.model.recognizer import Recognizer
    assert default_backend() == "onnx"
    assert Recognizer.load().info["onnx"]["graph"] == "encoder.onnx"  # the fp32 graph, not int8
    assert default_backend(tmp_path / "model.safetensors") == "torch"
    assert default_backend(tmp_path) == "onnx" and default_backend(tmp_path / "encoder.int8.onnx") == "onnx"
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    assert default_backend() == "torch"


def test_int8_is_the_bundled_models_graph_with_its_decoding():
    """--int8 alone runs the bundled export's int8 graph with the bundled model's default decoding (the
    word-LM beam search), as does --onnx-dir naming the shipped export (an export of one's own decodes
    greedily unless --beam or --lm); --model may name an export folder; with torch or a .safetensors file
    it is refused."""
    import argparse

    from asr import cli
    parser = argparse.ArgumentParser()
    cli.add_model_args(parser)
    cli.add_decoder_args(parser)
    args = parser.parse_args(["--int8"])
    recognizer = cli.load_recognizer(args)
    assert recognizer.info["onnx"]["graph"] == "encoder.int8.onnx"
    assert cli.load_decoder(args, recognizer).kind == "beam"
    shipped = parser.parse_args(["--onnx-dir", "asr/pretrained/onnx/encoder.int8.onnx"])  # the same graph, named
    assert cli.load_decoder(shipped, cli.load_recognizer(shipped)).kind == "beam"
    folder = parser.parse_args(["--int8", "--model", "asr/pretrained/onnx"])  # an export folder given as --model
    assert cli.load_recognizer(folder).info["onnx"]["graph"] == "encoder.int8.onnx"
    for bad in (["--int8", "--backend", "torch"], ["--int8", "--model", "asr/pretrained/default.safetensors"]):
        with pytest.raises(ValueError, match="--int8"):
            cli.load_recognizer(parser.parse_args(bad))
    result = run_tool("transcribe", EXAMPLES[0], "--int8", "--backend", "torch")
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "--int8" in result.stderr, result.stderr


def test_bad_onnx_dir_is_one_error_line(tmp_path):
    for folder in (tmp_path / "missing", tmp_path):
        result = run_tool("transcribe", EXAMPLES[0], "--onnx-dir", str(folder), torch_free=True)
        assert result.returncode == 1
        assert result.stderr.count("\n") == 1 and str(folder) in result.stderr, result.stderr


BUILD_FILES = ("asr", "pyproject.toml", "README.md")  # what `pip install .` reads of a checkout


def clean_copy(dest: Path) -> Path:
    """The build's files as a fresh clone has them (`git ls-files`: committed or new, never ignored, so no build
    output, cache or ignored file of this checkout the package might lean on), copied from the working tree."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *BUILD_FILES],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():  # a file deleted in the working tree is not in a clone of it either
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def healthy(url: str, seconds: float = 60.0) -> bool:
    """Whether `url` answers 200 within `seconds` (503 and refused connections while the model loads)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                if answer.status == 200:
                    return True
        except OSError:  # URLError, HTTPError (503), a reset connection
            pass
        time.sleep(0.2)
    return False


def test_clean_copy_is_what_a_clone_holds(tmp_path):
    ignored = ROOT / "asr" / "__pycache__" / "stray.pyc"  # ignored by .gitignore, as a build output would be
    ignored.parent.mkdir(exist_ok=True)
    ignored.write_bytes(b"")
    try:
        copy = clean_copy(tmp_path)
    finally:
        ignored.unlink()
    assert (copy / "asr" / "pretrained" / "default.safetensors").is_file() and (copy / "pyproject.toml").is_file()
    assert not (copy / "asr" / "__pycache__").exists() and not (copy / "recipes").exists()


def test_runtime_installs_and_transcribes_without_the_training_stack(tmp_path):
    """README's light install from a clean copy of the checkout: a fresh venv with `pip install .[onnx]` only (no
    torch). The shipped examples, and an m4a made there with that venv's PyAV, transcribe to the torch backend's
    text, restored (cased, punctuated) and with a hotword list; asr-stream streams and asr-serve serves."""
    source = clean_copy(tmp_path / "source")  # pip builds in the tree it installs: a copy, so the checkout stays put
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    pip = subprocess.run([python, "-m", "pip", "install", "-q", f"{source}[onnx]"], capture_output=True, text=True,
                         env={**ENV, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}, timeout=900)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    probe = subprocess.run([python, "-c", "import torch"], capture_output=True, text=True)
    assert probe.returncode != 0 and "No module named 'torch'" in probe.stderr  # the training stack is not there
    m4a = tmp_path / "slt.m4a"  # AAC, as a phone records it: read through PyAV (asr.audio.media)
    ok(subprocess.run([python, str(ROOT / "tests" / "media_files.py"), str(ROOT / EXAMPLES[1]), str(m4a)],
                      capture_output=True, text=True, env=ENV, timeout=120))
    audio = [str(ROOT / p) for p in EXAMPLES] + [str(m4a)]
    got = ok(subprocess.run([str(venv / "bin" / "asr-transcribe"), *audio, "--backend", "onnx"], cwd=tmp_path,
                            capture_output=True, text=True, env=ENV, timeout=600))  # the console script
    location = subprocess.run([python, "-c", "import asr; print(asr.__file__)"], cwd=tmp_path, capture_output=True, text=True)
    assert str(venv) in location.stdout  # the installed package ran, not the checkout
    shipped = subprocess.run([python, "-c", "from asr.decoding import lm_binary as b; from asr.pretrained import "
                              "default_lm_path as p; print(b.fast_form(p()).name)"], cwd=tmp_path, capture_output=True,
                             text=True, env=ENV)
    assert shipped.stdout.strip() == "default.klm", shipped.stderr  # the LM's binary ships and matches its ARPA
    expected = ok(run_tool("transcribe", *audio, "--backend", "torch", cwd=tmp_path))
    assert got == expected and len(got.splitlines()) == len(EXAMPLES) + 1
    texts = [line.split("\t")[1] for line in got.splitlines()]
    assert texts[-1] == texts[1]  # the m4a reads as its flac does (the synthetic example's text survives AAC coding)
    assert got != got.upper()  # the restorer ran: cased, punctuated text
    hot = tmp_path / "hotwords.txt"  # the hotword search runs there too, as with torch
    hot.write_text("pemberton 12\nokonkwo\n")
    got = ok(subprocess.run([str(venv / "bin" / "asr-transcribe"), *audio, "--backend", "onnx", "--hotwords", str(hot)],
                            cwd=tmp_path, capture_output=True, text=True, env=ENV, timeout=600))
    assert got == ok(run_tool("transcribe", *audio, "--backend", "torch", "--hotwords", str(hot), cwd=tmp_path))
    streamed = ok(subprocess.run([str(venv / "bin" / "asr-stream"), "--file", str(ROOT / EXAMPLES[0]), "--greedy",
                                  "--json"], cwd=tmp_path, capture_output=True, text=True, env=ENV, timeout=300))
    assert [e["text"] for e in map(json.loads, streamed.splitlines()) if e["is_final"]]
    server = subprocess.Popen([str(venv / "bin" / "asr-serve"), "--port", "0", "--greedy", "--workers", "1"],
                              cwd=tmp_path, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        line = server.stderr.readline()
        port = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert port, f"no listening line from the light install's asr-serve: {line!r}"
        assert healthy(f"http://127.0.0.1:{port.group(1)}/healthz")
    finally:
        server.terminate()
        server.wait(20)
    for script, args in (("asr-export", ["--onnx", str(tmp_path / "export")]),  # what needs torch: one error line
                         ("asr-serve", ["--backend", "torch", "--workers", "2", "--port", "0"])):
        refused = subprocess.run([str(venv / "bin" / script), *args], cwd=tmp_path, capture_output=True, text=True,
                                 env=ENV, timeout=120)
        assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
        assert "pip install 'asr[train]'" in refused.stderr, refused.stderr


def test_serve_onnx_without_torch_gives_the_torch_stream(tmp_path):
    """asr.serve --backend onnx, with torch unimportable, answers a client as asr.stream (torch) does."""
    import numpy as np
    import soundfile as sf
    from websockets.sync.client import connect

    wave, rate = sf.read(ROOT / EXAMPLES[-1], dtype="int16")
    assert rate == 16000
    pcm = tmp_path / "example.wav"
    sf.write(pcm, wave, rate, subtype="PCM_16")  # what the client sends is exactly this file
    expected = rows(ok(run_tool("stream", "--file", str(pcm), "--json", "--greedy", "--backend", "torch")), "compute_ms")
    server = subprocess.Popen([sys.executable, "-c", NO_TORCH, "asr.serve", "--port", "0", "--backend", "onnx",
                               "--greedy"], cwd=ROOT, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        line = server.stderr.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, f"no listening line from asr.serve: {line!r}"
        with connect(f"ws://127.0.0.1:{match.group(1)}/asr") as ws:
            for start in range(0, wave.size, 4000):
                ws.send(np.ascontiguousarray(wave[start:start + 4000]).astype("<i2").tobytes())
            ws.send(json.dumps({"type": "end"}))
            events = [json.loads(message) for message in ws]
    finally:
        server.terminate()
        server.wait(20)
    finals = [e["text"] for e in events if e["is_final"]]
    assert finals and finals == [e["text"] for e in expected if e["is_final"]]
