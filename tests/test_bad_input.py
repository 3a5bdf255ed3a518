"""Bad input: a correct result, or one error line naming the file and the reason plus a non-zero exit."""
from __future__ import annotations

import argparse
import importlib
import io
import json
import os
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from safetensors.torch import save_file

from asr import evaluate, stream, transcribe
from asr.audio import AudioError
from asr.corpus.manifest import ManifestError
from asr.model.errors import ModelError
from asr.model.loader import load_config, load_model
from conftest import tone, write
from helpers import ROOT


def run_transcribe(capsys, *args: str) -> tuple[int, str, list[str]]:
    code = transcribe.main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err.splitlines()


def make_bad(folder: Path) -> dict[str, tuple[Path, str]]:
    """name -> (file, expected words of the error reason)."""
    folder.mkdir(exist_ok=True)
    empty = folder / "empty.wav"
    empty.write_bytes(b"")
    corrupt = folder / "corrupt.flac"
    flac = bytearray(write(folder / "ok.flac", tone(1.0)).read_bytes())
    flac[len(flac) // 2:len(flac) // 2 + 300] = b"\xff" * 300
    corrupt.write_bytes(bytes(flac))
    (folder / "ok.flac").unlink()
    notes = folder / "notes.wav"
    notes.write_text("these are not samples\n" * 20)
    nan = write(folder / "nan.wav", np.array([0.1, np.nan, 0.2] * 1000, dtype=np.float32), subtype="FLOAT")
    zero = folder / "zero.wav"
    sf.write(str(zero), np.zeros(0, dtype=np.float32), 16000)
    return {"empty": (empty, "the file is empty"),
            "corrupt": (corrupt, "read failed"), "not audio": (notes, "not readable audio"),
            "nan": (nan, "invalid (NaN or infinite) samples"), "no samples": (zero, "contains no audio samples"),
            "missing": (folder / "missing.ogg", "no such file")}


BAD_CASES = ["empty", "corrupt", "not audio", "nan", "no samples", "missing"]


@pytest.mark.parametrize("case", BAD_CASES)
def test_bad_file_gives_one_error_line(case: str, model_path: Path, tmp_path: Path, capsys) -> None:
    path, reason = make_bad(tmp_path)[case]
    code, out, err = run_transcribe(capsys, str(path), "--model", str(model_path))
    assert code == 1 and out == ""
    assert err[0].startswith(f"asr.transcribe: error: {path}: ") and reason in err[0], err
    assert len(err) == 2 and str(path) in err[1]  # the error, then the summary


def test_batch_goes_on_and_summary_names_failures(model_path: Path, tmp_path: Path, capsys) -> None:
    bad = make_bad(tmp_path / "bad")
    good = write(tmp_path / "good.flac", tone(0.7))
    folder = tmp_path / "quiet"
    folder.mkdir()
    (folder / "readme.txt").write_text("no audio here")
    inputs = [str(p) for p, _ in bad.values()] + [str(good), str(folder)]
    code, out, err = run_transcribe(capsys, *inputs, "--model", str(model_path), "--format", "json")
    assert code == 1
    assert [json.loads(line)["audio"] for line in out.splitlines()] == [str(good)]
    assert f"asr.transcribe: error: {folder}: no audio files in this directory" in err[0]
    summary = err[-1]
    assert summary.startswith(f"asr.transcribe: {len(bad) + 1} input(s) failed, 1 transcribed")
    assert all(str(p) in summary for p, _ in bad.values()) and str(folder) in summary


def test_a_truncated_wav_is_transcribed_up_to_where_it_ends_with_a_warning(tmp_path: Path, capsys) -> None:
    """A recording stopped before its header was fixed, or a copy cut short, gave nothing of the audio it holds."""
    speech = sf.read(ROOT / "asr" / "examples" / "synthetic_slt.flac", dtype="float32")[0]
    whole = write(tmp_path / "whole.wav", speech, subtype="PCM_16")
    truncated = tmp_path / "truncated.wav"
    truncated.write_bytes(whole.read_bytes()[: 44 + speech.size])  # the header and half of the samples
    held = write(tmp_path / "held.wav", sf.read(truncated, dtype="float32")[0], subtype="PCM_16")  # what it holds
    code, out, err = run_transcribe(capsys, str(truncated), "--format", "json")
    assert code == 0 and err == [f"asr.transcribe: warning: {truncated}: truncated file (header declares "
                                 f"{2 * speech.size} bytes of samples, the file holds {speech.size}): read up to "
                                 "where it ends"]
    result = json.loads(out)
    assert result["duration"] == pytest.approx(speech.size / 2 / 16000, abs=1e-3) and result["text"]
    code, out, err = run_transcribe(capsys, str(held), "--format", "json")
    assert code == 0 and err == [] and json.loads(out)["text"] == result["text"]


@pytest.mark.parametrize("rate,channels,subtype,seconds", [
    (8000, 1, "PCM_16", 1.0), (48000, 1, "PCM_16", 1.0), (44100, 1, "PCM_24", 1.0),
    (16000, 2, "PCM_16", 1.0), (22050, 2, "FLOAT", 0.5), (16000, 1, "PCM_16", 1 / 16000)])
def test_odd_formats_give_results(rate: int, channels: int, subtype: str, seconds: float, model_path: Path,
                                  tmp_path: Path, capsys) -> None:
    audio = write(tmp_path / "x.wav", tone(seconds, rate, channels=channels), rate, subtype)
    code, out, err = run_transcribe(capsys, str(audio), "--model", str(model_path), "--format", "json")
    assert code == 0 and err == []
    result = json.loads(out)
    assert result["duration"] == pytest.approx(seconds, abs=1e-3)
    if seconds < 0.025:  # shorter than one analysis window: nothing can be decoded
        assert result["text"] == "" and result["words"] == []


def test_silence_gives_a_result(model_path: Path, tmp_path: Path, capsys) -> None:
    audio = write(tmp_path / "silence.ogg", np.zeros(40000, dtype=np.float32))
    code, out, err = run_transcribe(capsys, str(audio), "--model", str(model_path), "--format", "json")
    assert code == 0 and json.loads(out)["duration"] == pytest.approx(2.5, abs=1e-3)


def test_broken_manifest_names_file_and_line(model_path: Path, tmp_path: Path, capsys) -> None:
    audio = write(tmp_path / "a.wav", tone(0.5))
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio": str(audio), "text": "a"}) + "\n{not json\n")
    code, out, err = run_transcribe(capsys, str(manifest), str(audio), "--model", str(model_path), "--format", "json")
    assert code == 1 and json.loads(out)["audio"] == str(audio)  # the other input still ran
    assert err[0].startswith(f"asr.transcribe: error: {manifest}:2: broken manifest line")
    assert evaluate.main(["--manifest", str(manifest), "--model", str(model_path)]) == 1
    assert capsys.readouterr().err.startswith(f"asr.evaluate: error: {manifest}:2: broken manifest line")


def test_foreign_or_corrupted_models_are_refused(tmp_path: Path, capsys, model_path: Path) -> None:
    marker = tmp_path / "unpickled"

    class Payload:
        def __reduce__(self):
            return (os.mkdir, (str(marker),))

    audio = write(tmp_path / "a.wav", tone(0.5))
    pickled = tmp_path / "pickle.safetensors"
    pickled.write_bytes(pickle.dumps(Payload()))
    torch_file = tmp_path / "weights.pt"
    torch.save({"payload": Payload()}, torch_file)
    foreign = tmp_path / "foreign.safetensors"
    save_file({"w": torch.zeros(2)}, str(foreign), metadata={"format": "pt"})
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(model_path.read_bytes()[:5000])
    for model, reason in [(pickled, "not a valid asr model file"), (torch_file, "not a valid asr model file"),
                          (foreign, "not an asr model"), (cut, "not a valid asr model file"),
                          (tmp_path / "none.safetensors", "no such model file")]:
        code, out, err = run_transcribe(capsys, str(audio), "--model", str(model))
        assert code == 1 and len(err) == 1 and err[0].startswith(f"asr.transcribe: error: {model}: ")
        assert reason in err[0], err
    assert stream.main(["--file", str(audio), "--model", str(foreign)]) == 1
    for model in (pickled, torch_file, foreign, cut):  # the config-only reader refuses them too
        with pytest.raises(ModelError, match="asr model"):
            load_config(model)
    assert not marker.exists(), "a model file was unpickled"
    assert load_config(model_path) == load_model(model_path)[0].cfg


@pytest.mark.parametrize("kind", ["audio", "binary", "array"])
def test_a_manifest_that_is_not_one_is_one_error_line(kind: str, model_path: Path, tmp_path: Path, capsys) -> None:
    """`asr.evaluate --manifest some.wav` (a common slip) and other non-manifests: one line, exit 1."""
    if kind == "audio":
        manifest = write(tmp_path / "some.wav", tone(0.5))
        reason = "not a JSON Lines manifest (binary or not UTF-8 text)"
    elif kind == "binary":
        manifest = tmp_path / "garbled.jsonl"
        manifest.write_bytes(b"\x00\xff\xfe garbage \x80\x81")
        reason = "not a JSON Lines manifest (binary or not UTF-8 text)"
    else:
        manifest = tmp_path / "list.jsonl"
        manifest.write_text('["audio.wav", "text"]\n')
        reason = ":1: broken manifest line (TypeError: a line must be a JSON object, not list)"
    assert evaluate.main(["--manifest", str(manifest), "--model", str(model_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"asr.evaluate: error: {manifest}{'' if reason.startswith(':') else ': '}{reason}"]


def test_inference_uses_one_thread_unless_told(model_path: Path, tmp_path: Path, capsys) -> None:
    """torch's default (all cores) fights whatever else runs on the machine; a 500 ms chunk gains
    nothing from more threads, so every tool runs the model on 1 thread unless --threads says otherwise."""
    audio = write(tmp_path / "a.wav", tone(0.5))
    torch.set_num_threads(2)
    assert transcribe.main([str(audio), "--model", str(model_path), "--greedy"]) == 0
    assert torch.get_num_threads() == 1
    assert transcribe.main([str(audio), "--model", str(model_path), "--greedy", "--threads", "2"]) == 0
    assert torch.get_num_threads() == 2
    torch.set_num_threads(1)


TOOLS = ["asr.transcribe", "asr.stream", "asr.evaluate", "asr.serve", "asr.export", "asr.manifest",
         "asr.training.lm.build", "asr.training.lm.tune", "bench.step", "bench.attention", "bench.resume",  # bench: scripts/bench/
         "asr.training.lm.mix", "asr.finetune"]
COMMANDS = {"asr.training.lm.build": "asr.training.lm"}  # a module its folder's __main__ runs: named by that command


class _Parsed(Exception):
    """Raised instead of parsing: carries the tool's parser out of its main."""


def tool_parser(module: str, monkeypatch) -> argparse.ArgumentParser:
    """The parser a tool's `main` builds (caught as it parses, so nothing runs)."""
    def catch(parser, *args, **kwargs):
        raise _Parsed(parser)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", catch)
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))  # the benches' package, `bench`
    with pytest.raises(_Parsed) as caught:
        importlib.import_module(module).main([])
    monkeypatch.undo()
    return caught.value.args[0]


@pytest.mark.parametrize("module", TOOLS)
def test_every_float_option_refuses_nan_and_infinity(module: str, monkeypatch) -> None:
    """`--lm-weight nan` had been taken and gave empty text with exit 0: every option that takes a float, in
    every tool, goes through the one type that refuses NaN and infinities."""
    floats = []
    for action in tool_parser(module, monkeypatch)._actions:
        try:
            parsed = action.type("2.5") if callable(action.type) else None
        except (argparse.ArgumentTypeError, ValueError, TypeError):
            continue
        if isinstance(parsed, float):
            floats.append(action.option_strings[0])
            for bad in ("nan", "inf", "-inf", "NaN"):
                with pytest.raises(argparse.ArgumentTypeError, match="finite"):
                    action.type(bad)
    assert floats or module in ("asr.export", "asr.manifest", "asr.training.lm.build", "bench.resume"), module


def test_a_nan_weight_is_one_error_line(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        transcribe.main(["x.wav", "--lm-weight", "nan"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "asr.transcribe: error: argument --lm-weight: not a finite number: 'nan' "
        "(python -m asr.transcribe --help lists the options)"]


@pytest.mark.parametrize("module", [tool for tool in TOOLS if tool.startswith("asr.")])
def test_an_option_error_is_one_line_and_the_usage_only_on_help(module: str, capsys) -> None:
    """An unknown option is one line naming the tool and --help, exit status 2 (no 17-24 line usage block before
    it); --help prints the usage."""
    main = importlib.import_module(module).main
    command = COMMANDS.get(module, module)
    with pytest.raises(SystemExit) as exit_:
        main(["--no-such-option"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"{command}: error: ") and f"python -m {command} --help" in err[0], err
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0 and capsys.readouterr().out.startswith(f"usage: python -m {command}")


@pytest.mark.parametrize("value, parsed", [("-inf", None), ("-1e3", -1000.0), ("-.5", -0.5), ("-2", -2.0)])
def test_a_negative_number_is_a_value_not_an_option(value: str, parsed: float | None, capsys) -> None:
    """`--word-score -inf` was read as --word-score without its value ("expected one argument")."""
    parser = tool_parser_of_transcribe()
    if parsed is not None:
        assert parser.parse_args(["a.wav", "--word-score", value]).word_score == parsed
        return
    with pytest.raises(SystemExit):
        parser.parse_args(["a.wav", "--word-score", value])
    assert "argument --word-score: not a finite number: '-inf'" in capsys.readouterr().err


def tool_parser_of_transcribe() -> argparse.ArgumentParser:
    return transcribe._parser()


def text_manifest(folder: Path, text: object) -> Path:
    """A two-line manifest: a good line, then one whose text is `text` (MISSING: no "text" at all)."""
    folder.mkdir(exist_ok=True)
    audio = write(folder / "a.wav", tone(0.5))
    bad = {"audio": str(audio)} if text is MISSING else {"audio": str(audio), "text": text}
    manifest = folder / "m.jsonl"
    manifest.write_text(json.dumps({"audio": str(audio), "text": "the tone"}) + "\n" + json.dumps(bad) + "\n")
    return manifest


MISSING = object()
NO_TEXT = {"missing": (MISSING, 'no "text"'), "empty": ("", """"text" has no words ('')"""),
           "null": (None, '"text" is null'), "number": (7, '"text" is a int, not a string'),
           "marks only": (" ... ", """"text" has no words (' ... ')""")}


@pytest.mark.parametrize("case", NO_TEXT)
def test_a_manifest_line_without_text_is_refused_by_every_reader(case: str, model_path: Path, tmp_path: Path,
                                                                  capsys) -> None:
    """An empty reference scored silently (22.22% became 133.33%; null became the word NONE): asr.evaluate, training,
    the LM builder and asr.finetune refuse the line through the one reader, naming the file and the line."""
    from asr.finetune import main as finetune
    from asr.training.lm import build as lm
    from asr.training.acoustic.data import SourceConfig, load_sources
    text, reason = NO_TEXT[case]
    manifest = text_manifest(tmp_path / "data", text)
    expected = f"{manifest}:2: no usable text: {reason}"
    assert evaluate.main(["--manifest", str(manifest), "--model", str(model_path), "--greedy"]) == 1
    assert capsys.readouterr().err.splitlines() == [f"asr.evaluate: error: {expected}"]
    with pytest.raises(ManifestError, match=re.escape(expected)):
        load_sources([SourceConfig(manifest=str(manifest))])
    assert lm.main([str(manifest), "--out", str(tmp_path / "lm.arpa")]) == 1
    assert capsys.readouterr().err.splitlines() == [f"asr.training.lm: error: {expected}"]
    assert finetune([str(manifest), "--out", str(tmp_path / "ft"), "--check"]) == 1
    assert capsys.readouterr().err.splitlines() == [f"asr.finetune: error: {expected}"]


def test_skip_bad_scores_and_trains_on_the_rest_and_says_how_many(model_path: Path, tmp_path: Path, capsys) -> None:
    from asr.training.acoustic.data import SourceConfig, load_sources
    manifest = text_manifest(tmp_path / "data", None)
    alone = tmp_path / "data" / "alone.jsonl"
    alone.write_text(manifest.read_text().splitlines()[0] + "\n")
    assert evaluate.main(["--manifest", str(alone), "--model", str(model_path), "--greedy"]) == 0
    scored_alone = capsys.readouterr().out.splitlines()[-1]
    assert evaluate.main(["--manifest", str(manifest), "--model", str(model_path), "--greedy", "--skip-bad"]) == 0
    out, err = capsys.readouterr()
    without_rtf = lambda line: re.sub(r"RTF=\S+ ", "", line)  # noqa: E731
    assert without_rtf(out.splitlines()[-1]) == without_rtf(scored_alone) and scored_alone.endswith("utts=1")
    assert err.splitlines() == [f"asr.evaluate: {manifest}: skipped 1 bad line(s) (the first: {manifest}:2: no usable "
                                'text: "text" is null)']
    assert [u.text for u in load_sources([SourceConfig(manifest=str(manifest))], skip_bad=True)] == ["the tone"]
    assert transcribe.expand_inputs([str(manifest)])[2] == []  # transcribing needs no text: both lines are read


def test_an_empty_file_says_so_in_every_tool(model_path: Path, tmp_path: Path, capsys) -> None:
    """One reading path for all tools: an empty file is "the file is empty", as the OpenAI endpoint says,
    not ffmpeg's "Invalid data found when processing input"."""
    empty = tmp_path / "empty.m4a"
    empty.write_bytes(b"")
    expected = f"{empty}: the file is empty"
    assert stream.main(["--file", str(empty), "--model", str(model_path)]) == 1
    assert capsys.readouterr().err.strip() == f"asr.stream: error: {expected}"
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio": "empty.m4a", "text": "a"}) + "\n")
    assert evaluate.main(["--manifest", str(manifest), "--model", str(model_path), "--batch-seconds", "0"]) == 1
    assert capsys.readouterr().err.splitlines()[0] == f"asr.evaluate: error: {expected}"
    code, _, err = run_transcribe(capsys, str(empty), "--model", str(model_path))
    assert code == 1 and err[0] == f"asr.transcribe: error: {expected}"
    with pytest.raises(AudioError, match="^- \\(stdin\\): the input is empty$"):
        list(read_blocks_of_empty_stdin(tmp_path))


def read_blocks_of_empty_stdin(tmp_path: Path):
    """read_blocks("-") with standard input redirected from an empty file."""
    from asr.audio.files import read_blocks
    empty = tmp_path / "nothing"
    empty.write_bytes(b"")
    import sys
    with open(empty, "rb") as handle:
        saved, sys.stdin = sys.stdin, io.TextIOWrapper(handle)
        try:
            yield from read_blocks("-")
        finally:
            sys.stdin = saved


@pytest.mark.parametrize("kind", ["a file", "inside a file"])
def test_an_output_dir_that_cannot_be_a_folder_is_named(kind: str, model_path: Path, tmp_path: Path, capsys) -> None:
    audio = write(tmp_path / "a.wav", tone(0.5))
    taken = tmp_path / "taken"
    taken.write_text("a file\n")
    target = taken if kind == "a file" else taken / "out"
    code, out, err = run_transcribe(capsys, str(audio), "--model", str(model_path), "--output-dir", str(target))
    reason = "is a file, not a folder" if kind == "a file" else f"{taken} is a file, not a folder"
    assert code == 1 and out == "" and err == [f"asr.transcribe: error: --output-dir {target}: {reason}"]


def test_manifest_paths_are_shown_normalised(model_path: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "audio").mkdir()
    (tmp_path / "lists").mkdir()
    audio = write(tmp_path / "audio" / "a.wav", tone(0.5))
    manifest = tmp_path / "lists" / "m.jsonl"
    manifest.write_text(json.dumps({"audio": "../audio/a.wav", "text": "a"}) + "\n"
                        + json.dumps({"audio": "../audio/./gone.wav", "text": "b"}) + "\n")
    code, out, err = run_transcribe(capsys, str(manifest), "--model", str(model_path), "--format", "json")
    assert code == 1 and json.loads(out)["audio"] == str(audio)
    assert err[0] == f"asr.transcribe: error: {tmp_path / 'audio' / 'gone.wav'}: no such file"
