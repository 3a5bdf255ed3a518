"""Casing and punctuation restoration: labels, a toy model trained with the recipe's command, both
backends, and the finals of asr.transcribe, asr.stream, asr.evaluate and the server."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from asr import evaluate, stream, transcribe
from asr.audio import load_audio, rechunk
from asr.decoding.decoder import Decoder
from asr.endpoint import emissions
from asr.recognizer import Recognizer
from asr.restore.labels import CAPITAL, COMMA, LOWER, NONE, PERIOD, QUESTION, UPPER, baseline, labelled, render
from asr.restore.metrics import score_baseline, score_restorer
from asr.restore.restorer import RestorerError, load_restorer
from asr.server.recognition import Recognition

ROOT = Path(__file__).resolve().parent.parent
KNOWN = ["Where are you going?", "What is your name?", "Are you coming with us?", "My name is John.",
         "I live in London with Mary.", "It is cold today, so wear a coat.", "Stop that now!",
         "The water was cold.", "We met the man at the station.", "Is it far from here?",
         "They went home early, and so did we.", "NASA sent a probe to the moon."]


def test_labels_are_read_off_a_sentence_and_rendered_back() -> None:
    item = labelled("Well, I don't know -- is NASA's well-known probe here?")
    assert item.words == ["WELL", "I", "DON'T", "KNOW", "IS", "NASA'S", "WELL", "KNOWN", "PROBE", "HERE"]
    assert item.cases == [CAPITAL, CAPITAL, LOWER, LOWER, LOWER, UPPER, LOWER, LOWER, LOWER, LOWER]
    assert item.marks == [COMMA, NONE, NONE, COMMA, NONE, NONE, NONE, NONE, NONE, QUESTION]
    assert render(item.words, item.cases, item.marks) == "Well, I don't know, is NASA's well known probe here?"
    assert labelled("There are 3 cats.") is None  # numbers do not map word for word
    assert baseline(["HELLO", "THERE"]) == ([CAPITAL, LOWER], [NONE, PERIOD])


@pytest.fixture(scope="session")
def toy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A toy restorer, trained by the recipe's command (restorer=toy) on KNOWN until it knows them."""
    root = tmp_path_factory.mktemp("restorer")
    (root / "train.txt").write_text("\n".join(KNOWN * 20) + "\n")  # 15 steps an epoch: few validations
    (root / "held.txt").write_text("\n".join(KNOWN[:4]) + "\n")
    run = subprocess.run([sys.executable, "-m", "asr.training.restorer", "restorer=toy", f"data.train={root}/train.txt",
                          f"data.valid={root}/held.txt", f"run_dir={root}/run", "trainer.max_epochs=8"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "restorer: period_f1=" in run.stdout and "baseline: period_f1=" in run.stdout
    return root / "run"


def test_the_toy_model_restores_the_sentences_it_learned(toy_run: Path) -> None:
    restorer = load_restorer("onnx", toy_run / "restorer.onnx")
    for sentence in ["Where are you going?", "My name is John.", "It is cold today, so wear a coat."]:
        assert restorer.restore(labelled(sentence).words and " ".join(labelled(sentence).words)) == sentence
    assert restorer.restore("") == ""
    held = [labelled(s) for s in KNOWN]
    assert score_restorer(held, restorer.labels).case_accuracy() > score_baseline(held).case_accuracy()
    metrics = json.loads((toy_run / "metrics.json").read_text())
    assert set(metrics["held_out"]) == {"period_f1", "comma_f1", "question_f1", "exclaim_f1", "case_accuracy", "sentences"}


def test_onnx_and_torch_restorers_agree(toy_run: Path) -> None:
    torch_r = load_restorer("torch", toy_run / "restorer.safetensors")
    onnx_r = load_restorer("onnx", toy_run / "restorer.onnx")
    ids = np.random.default_rng(0).integers(0, 40, size=(1, 30))
    for a, b in zip(torch_r.run(ids), onnx_r.run(ids)):
        np.testing.assert_allclose(a, b, atol=1e-4)
    for sentence in KNOWN + ["THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG", "ZORBLAX"]:
        plain = " ".join(labelled(sentence).words) if labelled(sentence) else sentence
        assert torch_r.restore(plain) == onnx_r.restore(plain)


@pytest.mark.parametrize("content", [b"", b"\x89PNG\r\n\x1a\n\x00garbage"])
def test_a_bad_restorer_file_is_one_clear_error(tmp_path: Path, content: bytes) -> None:
    for backend, name in (("torch", "r.safetensors"), ("onnx", "r.onnx")):
        (tmp_path / name).write_bytes(content)
        with pytest.raises(RestorerError, match=str(tmp_path / name)):
            load_restorer(backend, tmp_path / name)


def test_the_tools_refuse_a_bad_restorer_in_one_line(tmp_path: Path, speech_wav: Path, capsys) -> None:
    bad = tmp_path / "restorer.onnx"
    bad.write_bytes(b"not a graph")
    assert transcribe.main([str(speech_wav), "--backend", "onnx", "--restorer", str(bad)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"asr.transcribe: error: {bad}: not a usable restorer graph")


def _run(main, args: list[str], capsys) -> str:
    assert main(args) == 0
    return capsys.readouterr().out


def test_transcribe_restores_finals_and_plain_turns_it_off(toy_run: Path, speech_wav: Path, tmp_path: Path, capsys) -> None:
    onnx = str(toy_run / "restorer.onnx")
    common = [str(speech_wav), "--backend", "onnx"]
    plain = _run(transcribe.main, common + ["--plain"], capsys).strip()
    assert plain and plain == plain.upper()
    restorer = load_restorer("onnx", onnx)
    assert _run(transcribe.main, common + ["--restorer", onnx], capsys).strip() == restorer.restore(plain)
    record = json.loads(_run(transcribe.main, common + ["--restorer", onnx, "--format", "json"], capsys))
    assert record["text"] == restorer.restore(plain) and record["plain"] == plain
    assert " ".join(w["word"] for w in record["words"]) == plain  # word times stay per plain word
    srt = _run(transcribe.main, common + ["--restorer", onnx, "--format", "srt"], capsys)
    cue_words = " ".join(line for line in srt.splitlines() if line and "-->" not in line and not line.isdigit())
    assert cue_words == restorer.restore(plain)
    vtt = _run(transcribe.main, common + ["--format", "vtt", "--plain"], capsys)
    assert plain.split()[0] in vtt


def test_stream_json_finals_carry_the_plain_words(toy_run: Path, speech_wav: Path, capsys) -> None:
    out = _run(stream.main, ["--file", str(speech_wav), "--json", "--backend", "onnx", "--restorer",
                             str(toy_run / "restorer.onnx")], capsys)
    events = [json.loads(line) for line in out.splitlines()]
    finals = [e for e in events if e["is_final"]]
    restorer = load_restorer("onnx", toy_run / "restorer.onnx")
    assert finals and all(e["text"] == restorer.restore(e["plain"]) for e in finals)
    assert all("plain" not in e and e["text"] == e["text"].upper() for e in events if not e["is_final"])
    plain = [json.loads(line) for line in _run(stream.main, ["--file", str(speech_wav), "--json", "--backend", "onnx",
                                                             "--plain"], capsys).splitlines()]
    assert [e["text"] for e in plain if e["is_final"]] == [e["plain"] for e in finals]


def test_server_finals_are_restored(toy_run: Path, speech_wav: Path) -> None:
    recognizer = Recognizer.load(backend="onnx")
    decoder = Decoder.load(recognizer.tokenizer, None, restorer=load_restorer("onnx", toy_run / "restorer.onnx"))
    recognition = Recognition(recognizer, decoder)
    served = recognition.open()
    events = []
    for chunk in rechunk([load_audio(speech_wav)], 8000):
        events += recognition.advance([served], [chunk])[0]
    events += recognition.finish(served)
    local = list(emissions(recognizer, rechunk([load_audio(speech_wav)], 8000), decoder))
    assert [e.to_json()["text"] for e in events] == [e.to_json()["text"] for e in local]
    assert any(e.is_final and e.plain for e in events)


def test_evaluate_scores_the_restorer_beside_the_baseline(toy_run: Path, tmp_path: Path, capsys) -> None:
    text = tmp_path / "held.txt"
    text.write_text("\n".join(KNOWN) + "\n")
    out = _run(evaluate.main, ["--restorer-text", str(text), "--backend", "onnx", "--restorer",
                               str(toy_run / "restorer.onnx")], capsys).splitlines()
    assert [line.split(":")[0] for line in out] == ["restorer", "baseline"]
    assert out[1] == ("baseline: period_f1=73.68 comma_f1=0.00 question_f1=0.00 exclaim_f1=0.00 "
                      "case_accuracy=93.85 sentences=12")  # 7 periods of 12 ends; John, London, Mary, NASA
    assert evaluate.main(["--restorer-text", str(text), "--backend", "onnx", "--plain"]) == 1
    assert "no restorer" in capsys.readouterr().err
