"""Recipe prepare steps: LibriSpeech manifests from a fake tree; manifest checking."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import soundfile as sf

from helpers import ROOT


def fake_librispeech(root: Path) -> None:
    chapter = root / "dev-clean" / "84" / "121123"
    chapter.mkdir(parents=True)
    lines = []
    for i, text in enumerate(["GO DO YOU HEAR", "BUT IN LESS THAN FIVE MINUTES THE STAIRCASE GROANED"]):
        utt = f"84-121123-{i:04d}"
        sf.write(chapter / f"{utt}.flac", np.zeros(16000 * (i + 1), dtype=np.float32), 16000)
        lines.append(f"{utt} {text}")
    (chapter / "84-121123.trans.txt").write_text("\n".join(lines) + "\n")


def test_librispeech_manifest_from_fake_tree(tmp_path):
    fake_librispeech(tmp_path / "LibriSpeech")
    out = tmp_path / "manifests"
    result = subprocess.run([sys.executable, str(ROOT / "recipes/librispeech/prepare.py"), "--root",
                             str(tmp_path / "LibriSpeech"), "--out", str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in (out / "dev-clean.jsonl").read_text().splitlines()]
    assert [r["text"] for r in rows] == ["GO DO YOU HEAR", "BUT IN LESS THAN FIVE MINUTES THE STAIRCASE GROANED"]
    assert [r["duration"] for r in rows] == [1.0, 2.0] and rows[0]["speaker"] == "84"
    assert (out / rows[1]["audio"]).resolve().is_file()


def test_librispeech_missing_root_fails(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "recipes/librispeech/prepare.py"), "--root",
                             str(tmp_path / "nothing")], capture_output=True, text=True)
    assert result.returncode == 1 and "no LibriSpeech subsets" in result.stderr


def test_check_manifest_reports_broken_rows(tmp_path):
    sf.write(tmp_path / "a.wav", np.zeros(1600, dtype=np.float32), 16000)
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text(json.dumps({"audio": "a.wav", "duration": 0.1, "text": "A"}) + "\n")
    bad.write_text(json.dumps({"audio": "missing.wav", "duration": 0.1, "text": "A"}) + "\n{oops\n")
    script = str(ROOT / "recipes/check_manifest.py")
    ok = subprocess.run([sys.executable, script, str(good)], capture_output=True, text=True)
    assert ok.returncode == 0 and "1 utterances" in ok.stdout
    broken = subprocess.run([sys.executable, script, str(bad)], capture_output=True, text=True)
    assert broken.returncode == 1 and "bad.jsonl:2" in broken.stderr
