"""Fast end-to-end check of recipes/synthetic/prepare.py with the system engines (espeak-ng, flite)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT
sf = pytest.importorskip("soundfile")
pytest.importorskip("numpy")
if not all(shutil.which(b) for b in ("espeak-ng", "flite", "sox")):
    pytest.skip("espeak-ng, flite or sox is not installed", allow_module_level=True)

sys.path.insert(0, str(ROOT))
from asr.text.normalize import normalize  # noqa: E402

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "She sells sea shells by the sea shore.",
    "I have 3 apples.",                      # digits: skipped
    "Hello.",                                # one word: skipped
    "Mr. Smith went to Washington.",         # abbreviation: skipped
    "It's a lovely day, isn't it?",
    "Where did you put the keys?",
    "The rain in Spain stays mainly in the plain.",
    "He walked slowly toward the old wooden bridge.",
    "Nobody expected the meeting to end so early.",
    "Bring me a glass of cold water, please.",
]
OTHER = ["Yesterday the wind was very strong.", "A small dog barked at the mailman.",
         "We will travel north next summer.", "Please close the window before you leave."]
DEV_CHAPTER = ["KATE LOVES CHINA",                       # a dev transcript: never synthesised, and ...
               "Her brother rode the ferry to the island."]  # ... nor its file's other lines (same chapters)


def _prepare(args: list[str]) -> None:
    """Run the recipe as users do, in a process of its own: its worker pool never forks this one (which holds
    torch's, onnxruntime's and Ray's threads from other tests)."""
    command = [sys.executable, str(ROOT / "recipes/synthetic/prepare.py"), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_prepare_small_corpus(tmp_path: Path) -> None:
    text_dir = tmp_path / "text"
    text_dir.mkdir()
    (text_dir / "a.txt").write_text("\n".join(SENTENCES) + "\n")
    (text_dir / "b.txt").write_text("\n".join(OTHER) + "\n")
    (text_dir / "c.txt").write_text("\n".join(DEV_CHAPTER) + "\n")
    dev = tmp_path / "dev.jsonl"
    dev.write_text(json.dumps({"audio": "x.ogg", "duration": 1.0, "text": "KATE LOVES CHINA"}) + "\n")
    out = tmp_path / "syn"
    args = ["--text-dir", str(text_dir), "--out", str(out), "--dev-manifest", str(dev), "--engines", "espeak",
            "flite", "--hours-train", "0.004", "--check-utts", "3", "--jobs", "2", "--rounds", "1"]
    _prepare(args)

    train, check = _read(out / "train.jsonl"), _read(out / "check.jsonl")
    assert train and check
    for row in train + check:
        assert set(row) == {"audio", "duration", "text", "speaker"}
        assert row["speaker"].split("-")[0] in {"espeak", "flite"}
        assert row["text"] == normalize(row["text"]) and 2 <= len(row["text"].split()) <= 25
        assert row["text"] not in {normalize(t) for t in DEV_CHAPTER} and "THREE" not in row["text"] and "MR" not in row["text"]
        assert row["audio"].startswith(f"audio/{row['speaker']}/") and row["audio"].endswith(".flac")
        info = sf.info(str(out / row["audio"]))
        assert info.samplerate == 16000 and info.channels == 1 and info.subtype == "PCM_16"
        assert row["duration"] > 0 and abs(info.duration - row["duration"]) < 0.01
        audio, _ = sf.read(str(out / row["audio"]))
        assert 0.29 <= abs(audio).max() <= 0.96

    # held-out sentences (index % 50 == 0 in each file: the first kept one) and voices never in train
    held_text = {normalize(SENTENCES[0]), normalize(OTHER[0])}
    sys.path.insert(0, str(ROOT / "recipes/synthetic"))
    import engines  # noqa: PLC0415

    held_voices = {v.speaker for e in ("espeak", "flite") for v in engines.voices(e) if engines.is_held_out(v)}
    assert "flite-slt" in held_voices and any(s.endswith("-m6") for s in held_voices)
    assert not {r["text"] for r in train} & held_text
    assert not {r["speaker"] for r in train} & held_voices
    assert {r["text"] for r in check} <= held_text
    lm_text = set((out / "train_text.txt").read_text().splitlines())  # the word LM's text
    assert {r["text"] for r in train} <= lm_text and not lm_text & (held_text | {"KATE LOVES CHINA"})

    # a re-run reuses the files and writes the same manifests
    before = (out / "train.jsonl").read_text(), (out / "check.jsonl").read_text()
    _prepare(args)
    assert ((out / "train.jsonl").read_text(), (out / "check.jsonl").read_text()) == before
