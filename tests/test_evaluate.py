"""`asr.evaluate`: scoring, offline == streaming, the report and the last line."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from asr import evaluate
from asr.manifest import write_manifest
from conftest import tone, write

LAST_LINE = re.compile(r"WER=(\d+\.\d\d) CER=(\d+\.\d\d) RTF=(\d+\.\d+) utts=(\d+)")


def test_score_counts_edits() -> None:
    words, chars, alignment = evaluate.score("A B C", "A X C D")
    assert (words.ref, words.sub, words.dels, words.ins) == (3, 1, 0, 1)
    assert [a["op"] for a in alignment] == ["equal", "substitute", "equal", "insert"]
    assert alignment[1] == {"op": "substitute", "ref": "B", "hyp": "X"}
    assert chars.ref == 5 and chars.errors == 3
    empty_words, _, _ = evaluate.score("", "HELLO THERE")
    assert (empty_words.ref, empty_words.ins) == (0, 2)


@pytest.fixture(scope="module")
def manifest(speech_wav: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("eval")
    rows = [{"audio": str(speech_wav), "duration": 2.0, "text": "The quick brown fox jumps over the lazy dog."},
            {"audio": "tone.flac", "duration": 1.2, "text": "a tone, 2 notes"},
            {"audio": "short.ogg", "duration": 0.7, "text": "hello"}]
    write(folder / "tone.flac", tone(1.2, 22050), 22050)
    write(folder / "short.ogg", tone(0.7, seed=3))
    write_manifest(folder / "m.jsonl", rows)
    return folder / "m.jsonl"


def run(capsys, *args: str) -> tuple[int, list[str]]:
    code = evaluate.main(list(args))
    return code, capsys.readouterr().out.splitlines()


def test_offline_and_streaming_agree(manifest: Path, model_path: Path, tmp_path: Path, capsys) -> None:
    report = tmp_path / "report.json"
    code, offline = run(capsys, "--manifest", str(manifest), "--model", str(model_path), "--report", str(report))
    assert code == 0
    code, streaming = run(capsys, "--manifest", str(manifest), "--model", str(model_path),
                          "--streaming", "--chunk-ms", "500")
    assert code == 0
    a, b = LAST_LINE.fullmatch(offline[-1]), LAST_LINE.fullmatch(streaming[-1])
    assert a and b and a.group(1, 2, 4) == b.group(1, 2, 4) and a.group(4) == "3"
    assert re.fullmatch(r"chunk_ms=500 latency_median_ms=\S+ latency_p95_ms=\S+", streaming[-2])
    assert offline[0] == streaming[0]  # the same substitutions/deletions/insertions

    data = json.loads(report.read_text())
    assert data["mode"] == "offline" and data["summary"]["utts"] == 3
    first = data["utterances"][0]
    assert first["ref"] == "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG"
    assert data["utterances"][1]["ref"] == "A TONE TWO NOTES"
    for utt in data["utterances"]:
        ops = utt["alignment"]
        assert " ".join(o["ref"] for o in ops if o["ref"]).split() == utt["ref"].split()
        assert " ".join(o["hyp"] for o in ops if o["hyp"]).split() == utt["hyp"].split()
    total_errors = sum(u["words"]["sub"] + u["words"]["dels"] + u["words"]["ins"] for u in data["utterances"])
    assert float(a.group(1)) == pytest.approx(100 * total_errors / 14, abs=0.01)


def test_limit_and_missing_audio(manifest: Path, model_path: Path, tmp_path: Path, capsys) -> None:
    code, lines = run(capsys, "--manifest", str(manifest), "--model", str(model_path), "--limit", "1")
    assert code == 0 and lines[-1].endswith(" utts=1")
    broken = tmp_path / "m.jsonl"
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    rows[1]["audio"] = str(tmp_path / "gone.wav")
    rows[2]["audio"] = str(manifest.parent / "short.ogg")
    write_manifest(broken, rows)
    code = evaluate.main(["--manifest", str(broken), "--model", str(model_path)])
    captured = capsys.readouterr()
    assert code == 1 and LAST_LINE.fullmatch(captured.out.splitlines()[-1]).group(4) == "2"
    assert captured.err.strip() == f"asr.evaluate: error: {tmp_path / 'gone.wav'}: no such file"


def test_split_keeps_that_split_and_unsplit_rows(manifest: Path, model_path: Path, tmp_path: Path, capsys) -> None:
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    rows[0]["split"], rows[1]["split"] = "test", "train"  # rows[2] names no split
    for row in rows[1:]:
        row["audio"] = str(manifest.parent / row["audio"])
    split = tmp_path / "split.jsonl"
    write_manifest(split, rows)
    code, lines = run(capsys, "--manifest", str(split), "--model", str(model_path), "--split", "test")
    assert code == 0 and lines[-1].endswith(" utts=2")  # of three rows: the test one and the unsplit one
