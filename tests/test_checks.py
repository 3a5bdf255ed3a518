"""Inputs are checked before anything loads (asr/cli/checks.py): every tool refuses a missing file, a bad manifest or
options that do not go together in one line and exit status 1, without loading a model or a word LM, and without
importing torch or onnxruntime. `scripts/bench/fail_fast.py` prints how long that takes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from asr import evaluate, finetune, serve, stream, transcribe
from asr.cli import checks
from asr.decoding.beam import WordLM
from asr.model.recognizer import Recognizer
from conftest import tone, write
from helpers import ROOT


@pytest.fixture
def nothing_loads(monkeypatch):
    """The model, the word LM, a server worker and asr.finetune's steps all raise if they are reached."""
    def refuse(*_, **__):
        raise AssertionError("loaded before the inputs were checked")
    monkeypatch.setattr(Recognizer, "load", refuse)
    monkeypatch.setattr(WordLM, "__init__", refuse)
    monkeypatch.setattr("asr.server.worker.build_app", refuse)
    monkeypatch.setattr("asr.server.supervisor.Supervisor.run", refuse)
    monkeypatch.setattr(finetune, "run", refuse)


def cases(tmp: Path) -> list[tuple[object, list[str], str]]:
    """(a tool's main, its arguments, its one error line) for inputs that cannot work."""
    audio = write(tmp / "a.wav", tone(0.5))
    empty = tmp / "empty.wav"
    empty.write_bytes(b"")
    manifest = tmp / "m.jsonl"
    manifest.write_text(json.dumps({"audio": "a.wav", "text": "a tone"}) + "\n")
    broken = tmp / "broken.jsonl"
    broken.write_text(json.dumps({"audio": "a.wav", "text": "a tone"}) + "\n{not json\n")
    missing, folder, taken = tmp / "missing.wav", tmp / "recordings", tmp / "taken"
    folder.mkdir()
    taken.write_text("a file\n")
    return [
        (transcribe.main, [str(missing)], f"asr.transcribe: error: {missing}: no such file"),
        (transcribe.main, [str(empty)], f"asr.transcribe: error: {empty}: the file is empty"),
        (transcribe.main, [str(folder)], f"asr.transcribe: error: {folder}: no audio files in this directory"),
        (transcribe.main, [str(audio), "--lm", str(tmp / "no.arpa")],
         f"asr.transcribe: error: {tmp / 'no.arpa'}: no such language model file"),
        (transcribe.main, [str(audio), "--model", str(tmp / "no.safetensors")],
         f"asr.transcribe: error: {tmp / 'no.safetensors'}: no such model file"),
        (transcribe.main, [str(audio), "--greedy", "--lm", str(manifest)],
         "asr.transcribe: error: --greedy cannot be combined with --beam or --lm"),
        (transcribe.main, [str(audio), "--int8", "--backend", "torch"],
         "asr.transcribe: error: --int8 is a graph of the ONNX export: it needs --backend onnx, not torch"),
        (transcribe.main, [str(audio), "--device", "gpu"],
         "asr.transcribe: error: --device 'gpu': must be cpu, cuda, cuda:N or auto"),
        (transcribe.main, [str(audio), "--output-dir", str(taken)],
         f"asr.transcribe: error: --output-dir {taken}: is a file, not a folder"),
        (stream.main, ["--file", str(missing)], f"asr.stream: error: {missing}: no such file"),
        (stream.main, ["--file", str(audio), "--hotwords", str(tmp / "hot.txt")],
         f"asr.stream: error: {tmp / 'hot.txt'}: no such hotword file"),
        (stream.main, ["--file", str(audio), "--greedy", "--hotwords", str(manifest)],
         "asr.stream: error: --hotwords needs the beam search with a word LM (not --greedy; with --model, add "
         "--beam or --lm)"),
        (evaluate.main, [str(tmp / "no.jsonl")], f"asr.evaluate: error: {tmp / 'no.jsonl'}: no such manifest"),
        (evaluate.main, [str(broken)],
         f"asr.evaluate: error: {broken}:2: broken manifest line (JSONDecodeError: Expecting property name enclosed "
         "in double quotes: line 1 column 2 (char 1))"),
        (evaluate.main, [str(manifest), "--report", str(tmp / "no" / "r.json")],
         f"asr.evaluate: error: --report {tmp / 'no' / 'r.json'}: no folder {tmp / 'no'} to write it in"),
        (evaluate.main, [str(manifest), "--restorer", str(tmp / "r.onnx")],
         f"asr.evaluate: error: {tmp / 'r.onnx'}: no such restorer file"),
        (serve.main, ["--port", "0", "--lm", str(tmp / "no.arpa")],
         f"asr.serve: error: {tmp / 'no.arpa'}: no such language model file"),
        (serve.main, ["--port", "0", "--workers", "2", "--model", str(tmp / "none")],
         f"asr.serve: error: {tmp / 'none'}: no such model file"),
        (finetune.main, [str(tmp / "none"), "--out", str(tmp / "out")], f"asr.finetune: error: {tmp / 'none'}: no "
                                                                          "such folder or file"),
        (finetune.main, [str(manifest), "--out", str(taken / "out")],
         f"asr.finetune: error: --out {taken / 'out'}: {taken} is a file, not a folder"),
        (finetune.main, [str(manifest), "--out", str(tmp / "out"), "--lm", str(tmp / "no.arpa")],
         f"asr.finetune: error: {tmp / 'no.arpa'}: no such language model file"),
    ]


def test_every_tool_says_what_is_wrong_before_anything_loads(nothing_loads, tmp_path: Path, capsys) -> None:
    for main, args, line in cases(tmp_path):
        assert main(args) == 1, (main.__module__, args)
        err = capsys.readouterr().err.strip().splitlines()
        assert err[0].startswith(line), (main.__module__, args, err)
        assert len(err) == (2 if main is transcribe.main and "--" not in " ".join(args) else 1), err  # + the summary


def test_a_missing_file_among_good_ones_is_said_first_and_the_rest_go_on(tmp_path: Path, capsys) -> None:
    """The check leaves asr.transcribe's rule: the files that can be read are transcribed, the summary names the rest."""
    good, missing = write(tmp_path / "good.wav", tone(0.5)), tmp_path / "gone.wav"
    assert transcribe.main([str(missing), str(good), "--greedy", "--format", "json"]) == 1
    out, err = capsys.readouterr()
    assert [json.loads(line)["audio"] for line in out.splitlines()] == [str(good)]
    assert err.splitlines()[0] == f"asr.transcribe: error: {missing}: no such file"
    assert err.splitlines()[-1] == f"asr.transcribe: 1 input(s) failed, 1 transcribed; failed: {missing}"


def test_the_checks_name_each_problem(tmp_path: Path) -> None:
    locked = tmp_path / "locked.wav"
    locked.write_bytes(b"RIFF")
    locked.chmod(0)
    if not os.access(locked, os.R_OK):  # (root reads anything)
        with pytest.raises(checks.InputError, match="cannot be read"):
            checks.audio_file(locked)
    with pytest.raises(checks.InputError, match=": is a directory$"):
        checks.audio_file(tmp_path)
    checks.audio_file("-")  # standard input is read when it comes
    with pytest.raises(checks.InputError, match="is a directory, not a language model file"):
        checks.readable(tmp_path, "language model file")
    checks.folder_to_write(tmp_path / "new" / "deeper", "--out")  # a folder that can be made


def test_the_path_to_the_check_imports_neither_torch_nor_onnxruntime(tmp_path: Path) -> None:
    """Each tool in a fresh interpreter, with a missing input: exit status 1, and the model's runtimes never imported."""
    missing = tmp_path / "missing.wav"
    code = (
        "import sys\n"
        "from asr import evaluate, finetune, serve, stream, transcribe\n"
        f"m = {str(missing)!r}\n"
        "codes = [transcribe.main([m]), stream.main(['--file', m]), evaluate.main([m + '.jsonl']),\n"
        "         serve.main(['--port', '0', '--lm', m]), finetune.main([m, '--out', m + '.out'])]\n"
        "print(codes, sorted({n.split('.')[0] for n in sys.modules} & {'torch', 'onnxruntime', 'lightning'}))\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.stdout.strip() == "[1, 1, 1, 1, 1] []", (run.stdout, run.stderr)
    assert len(run.stderr.strip().splitlines()) == 6  # one line each, and asr.transcribe's summary
