"""Casing and punctuation restoration: labels, a toy model trained with the recipe's command, both
backends, and the finals of asr.transcribe, asr.stream, asr.evaluate and the server."""
from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from asr import evaluate, stream, transcribe
from asr.audio.chunks import rechunk
from asr.audio.files import load_audio
from asr.decoding.decoder import Decoder
from asr.decoding.endpoint import emissions
from asr.model.recognizer import Recognizer
from asr.text.restore.align import align, carry_labels
from asr.text.restore.labels import (CAPITAL, COMMA, EXCLAIM, LOWER, NO_PAUSE, NONE, PERIOD, QUESTION, START, UPPER,
                                     baseline, labelled, pause_ids, render, word_pauses)
from asr.server.recognition import Recognition
from asr.text.restore.format import FORMAT, RestorerError
from asr.text.restore.metrics import score_baseline, score_restorer
from asr.text.restore.noise import Confusions, Pauses, corrupt
from asr.text.restore.restorer import load_restorer

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


def test_a_title_is_labelled_as_said_and_its_period_is_no_mark() -> None:
    item = labelled("Would Mr. Thornton come? Ask Dr. Watson.")
    assert item.words == ["WOULD", "MISTER", "THORNTON", "COME", "ASK", "DOCTOR", "WATSON"]
    assert item.cases == [CAPITAL, CAPITAL, CAPITAL, LOWER, CAPITAL, CAPITAL, CAPITAL]
    assert item.marks == [NONE, NONE, NONE, QUESTION, NONE, NONE, PERIOD]


def test_pauses_become_ids_and_come_from_word_times() -> None:
    assert pause_ids(None, 3) == [NO_PAUSE] * 3
    ids = pause_ids([9.0, 0.0, 0.05, 0.3, 2.0], 5)
    assert ids[0] == START and ids[1:] == sorted(ids[1:]) and len(set(ids)) == 5
    with pytest.raises(ValueError):
        pause_ids([0.1], 2)
    assert word_pauses([0.0, 0.5, 0.6], [0.4, 0.6, 0.9]) == pytest.approx([0.0, 0.1, 0.0])


def test_labels_are_carried_onto_recognized_words() -> None:
    ref = labelled("It is cold today, so wear a coat. I live in London.")
    assert align(["A", "B", "C"], ["A", "X", "C", "D"]) == [(0, 0), (1, 1), (2, 2), (None, 3)]
    # TODAY deleted (its comma moves to COLD), SO -> SEW, A inserted, I deleted (LIVE begins the sentence)
    got = carry_labels(ref, "IT IS COLD SEW WEAR A A COAT LIVE IN LONDON".split())
    assert got.marks == [NONE, NONE, COMMA, NONE, NONE, NONE, NONE, PERIOD, NONE, NONE, PERIOD]
    assert got.cases == [CAPITAL, LOWER, LOWER, LOWER, LOWER, LOWER, LOWER, LOWER, CAPITAL, LOWER, CAPITAL]
    # the first sentence's end deleted: COLD takes the period, and the former first word is lower case
    got = carry_labels(labelled("Stop that now! The water was cold."), "STOP THAT THE WATER WAS COLD".split())
    assert got.marks == [NONE, EXCLAIM, NONE, NONE, NONE, PERIOD] and got.cases[2] == CAPITAL


def test_noisy_copies_and_pauses_are_seeded() -> None:
    items = [labelled(s) for s in KNOWN]
    confusions = Confusions(sorted({w for item in items for w in item.words}) + ["THERE", "THEIR", "CODE"])
    assert "THEIR" in confusions.like("THERE") and "COLD" in confusions.like("CODE")

    def noisy(seed: int) -> list:
        rng = random.Random(seed)
        return [corrupt(item, confusions, rng) for item in items * 5]
    first = noisy(0)
    assert first == noisy(0) and first != noisy(1) and first != items * 5
    assert all(len(x.words) == len(x.cases) == len(x.marks) > 0 for x in first)
    pauses = Pauses({0: [0.05, 0.1], 1: [0.2], 2: [0.6, 0.8]})
    marks = [NONE, COMMA, NONE, PERIOD, NONE]
    drawn = pauses.draw(marks, random.Random(3))
    assert drawn == pauses.draw(marks, random.Random(3)) and len(drawn) == 5
    assert drawn[4] > drawn[3] > drawn[1] and drawn[2] > drawn[1]  # after the period, after the comma, after none


def _recognized(sentences: list[str]) -> str:
    """Fake recognized finals of sentence pairs (asr_outputs.py lines): 0.05 s between words, 0.6 s at sentence ends."""
    lines = []
    for a, b in zip(sentences, sentences[1:] + sentences[:1]):
        words, t, final = labelled(f"{a} {b}"), 0.0, []
        for i, word in enumerate(words.words):
            final.append([word, t, t + 0.3])
            t += 0.3 + (0.6 if words.marks[i] in (PERIOD, QUESTION, EXCLAIM) else 0.05)
        lines.append(json.dumps({"text": f"{a} {b}", "voice": "none", "finals": [final]}))
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def toy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A toy restorer, trained by the recipe's command (restorer=toy) on KNOWN until it knows them."""
    root = tmp_path_factory.mktemp("restorer")
    (root / "train.txt").write_text("\n".join(KNOWN * 20) + "\n")  # 15 steps an epoch: few validations
    (root / "held.txt").write_text("\n".join(KNOWN[:4]) + "\n")
    (root / "asr.jsonl").write_text(_recognized(KNOWN))
    run = subprocess.run([sys.executable, "-m", "asr.training.restorer", "restorer=toy", f"data.train={root}/train.txt",
                          f"data.valid={root}/held.txt", f"run_dir={root}/run", "trainer.max_epochs=8",
                          f"data.asr_train={root}/asr.jsonl"],
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
    assert torch_r.uses_pauses and onnx_r.uses_pauses
    rng = np.random.default_rng(0)
    ids, pauses = rng.integers(0, 40, size=(1, 30)), rng.integers(0, 13, size=(1, 30))
    for a, b in zip(torch_r.run(ids, pauses), onnx_r.run(ids, pauses)):
        np.testing.assert_allclose(a, b, atol=1e-4)
    assert not np.allclose(onnx_r.run(ids, pauses)[1], onnx_r.run(ids, np.zeros_like(pauses))[1])  # pauses count
    for sentence in KNOWN + ["THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG", "ZORBLAX"]:
        plain = " ".join(labelled(sentence).words) if labelled(sentence) else sentence
        timed = list(rng.uniform(0, 1, len(plain.split())))
        assert torch_r.restore(plain) == onnx_r.restore(plain)
        assert torch_r.restore(plain, timed) == onnx_r.restore(plain, timed)


def test_a_restorer_without_pauses_still_loads_and_ignores_them(tmp_path: Path) -> None:
    from asr.text.restore.model import RestorerConfig, RestorerNet, export_onnx, save_restorer
    net = RestorerNet(RestorerConfig(vocab_size=10, dim=4, hidden=4, layers=1)).eval()  # pause_buckets 0: format v1
    vocab = ["<pad>", "<unk>"] + "WHERE ARE YOU GOING A B C D".split()
    save_restorer(tmp_path / "r.safetensors", net, vocab)
    export_onnx(net, vocab, tmp_path / "r.onnx")
    for backend, name in (("torch", "r.safetensors"), ("onnx", "r.onnx")):
        restorer = load_restorer(backend, tmp_path / name)
        assert not restorer.uses_pauses
        assert restorer.restore("WHERE ARE YOU GOING", [0, 0.1, 0.9, 0.1]) == restorer.restore("WHERE ARE YOU GOING")
    import onnx
    assert {p.key: p.value for p in onnx.load(str(tmp_path / "r.onnx")).metadata_props}["format"] == FORMAT


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


def _restorations(restorer, record: dict) -> set[str]:
    """What the finals of a one-final transcript (`asr.transcribe --format json`) may read: restored with the
    pauses of its word times, or without (where the call site gives none)."""
    words = record["words"]
    pauses = word_pauses([w["start"] for w in words], [w["end"] for w in words])
    return {restorer.restore(record["plain"]), restorer.restore(record["plain"], pauses)}


def test_transcribe_restores_finals_and_plain_turns_it_off(toy_run: Path, speech_wav: Path, tmp_path: Path, capsys) -> None:
    onnx = str(toy_run / "restorer.onnx")
    common = [str(speech_wav), "--backend", "onnx"]
    plain = _run(transcribe.main, common + ["--plain"], capsys).strip()
    assert plain and plain == plain.upper()
    restorer = load_restorer("onnx", onnx)
    record = json.loads(_run(transcribe.main, common + ["--restorer", onnx, "--format", "json"], capsys))
    assert record["text"] in _restorations(restorer, record) and record["plain"] == plain
    assert _run(transcribe.main, common + ["--restorer", onnx], capsys).strip() == record["text"]
    assert " ".join(w["word"] for w in record["words"]) == plain  # word times stay per plain word
    srt = _run(transcribe.main, common + ["--restorer", onnx, "--format", "srt"], capsys)
    cue_words = " ".join(line for line in srt.splitlines() if line and "-->" not in line and not line.isdigit())
    assert cue_words == record["text"]
    vtt = _run(transcribe.main, common + ["--format", "vtt", "--plain"], capsys)
    assert plain.split()[0] in vtt


def test_stream_json_finals_carry_the_plain_words(toy_run: Path, speech_wav: Path, capsys) -> None:
    out = _run(stream.main, ["--file", str(speech_wav), "--json", "--backend", "onnx", "--restorer",
                             str(toy_run / "restorer.onnx")], capsys)
    events = [json.loads(line) for line in out.splitlines()]
    finals = [e for e in events if e["is_final"]]
    restorer = load_restorer("onnx", toy_run / "restorer.onnx")
    record = json.loads(_run(transcribe.main, [str(speech_wav), "--backend", "onnx", "--restorer",
                                               str(toy_run / "restorer.onnx"), "--format", "json"], capsys))
    assert [e["plain"] for e in finals] == [record["plain"]]
    assert finals[0]["text"] == record["text"] and record["text"] in _restorations(restorer, record)
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


def test_the_bundled_restorer_ends_a_sentence_at_a_long_pause() -> None:
    restorer = load_restorer("onnx")
    if not restorer.uses_pauses:
        pytest.skip("the bundled restorer reads no pauses")
    text = "I WENT HOME THE DOG WAS ASLEEP"
    even = [0.0] + [0.06] * 6
    assert restorer.restore(text, even).startswith("I went home the dog")
    paused = even[:3] + [0.7] + even[4:]  # 0.7 s before THE
    assert restorer.restore(text, paused).startswith("I went home. The dog")
