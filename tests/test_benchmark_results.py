"""benchmarks/RESULTS.md is the shipped model's, and the benchmark's accuracy is asr.evaluate's: its default row on a
few utterances is what `python -m asr.evaluate` prints for them."""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from asr.pretrained import default_model_path
from helpers import DATA, ROOT

RESULTS = ROOT / "benchmarks" / "RESULTS.md"
FULL_RUN = "python scripts/benchmark.py"  # on a quiet machine: bench/quiet.py refuses to write benchmarks/ otherwise


def test_results_md_is_the_shipped_models_full_run() -> None:
    """RESULTS.md names its model by the sha256 of its weights file (scripts/benchmark.py writes it there); a new
    default makes it stale until the benchmark runs again."""
    shipped = hashlib.sha256(default_model_path().read_bytes()).hexdigest()
    header = RESULTS.read_text().split("\n## ", 1)[0]
    named = re.findall(r"sha256 `([0-9a-f]{64})`", header)
    assert named == [shipped], (f"benchmarks/RESULTS.md names the model with sha256 {named[0] if named else 'none'}, "
                                f"not the shipped asr/pretrained/default.safetensors ({shipped}): regenerate it "
                                f"with `{FULL_RUN}` on a quiet machine")
    partial = f"RESULTS.md is a partial run: regenerate it with `{FULL_RUN}`"
    assert "(the shipped default)" in header and "Limit: all utterances per set" in header, partial
    assert "**Smoke run**" not in header and "**Accuracy only**" not in header, partial


def _examples_manifest(folder: Path) -> Path:
    """A few utterances to score: dev-clean-2's first two where the shared data is, else the shipped examples."""
    libri = DATA / "librispeech" / "dev-clean-2.jsonl"
    if libri.is_file():
        rows = libri.read_text().splitlines()[:2]
        return _write(folder, [{**json.loads(r), "audio": str(libri.parent / json.loads(r)["audio"])} for r in rows])
    examples = ROOT / "asr" / "examples"
    return _write(folder, [{"audio": str(examples / "synthetic_slt.flac"),
                            "text": "THE WEATHER WAS COLD AND THE CHILDREN STAYED AT HOME"},
                           {"audio": str(examples / "speechocean762_0813_0233.flac"),
                            "text": "WHERE ARE YOU GOING TO KEEP IT"}])


def _write(folder: Path, rows: list[dict]) -> Path:
    path = folder / "few.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_the_benchmarks_default_row_is_what_asr_evaluate_prints(tmp_path: Path) -> None:
    manifest = _examples_manifest(tmp_path)
    env = dict(os.environ, OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    bench = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark.py"), "--accuracy-only",
                            "--manifest", str(manifest), "--peers", "none", "--peer-cache", "none",
                            "--robustness", "none", "--streaming-limit", "1", "--out", str(tmp_path / "out")],
                           cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)
    assert bench.returncode == 0, bench.stderr[-2000:]
    evaluated = subprocess.run([sys.executable, "-m", "asr.evaluate", str(manifest)], cwd=ROOT, capture_output=True,
                               text=True, env=env, timeout=600)
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    printed = re.search(r"^WER=([\d.]+) CER=([\d.]+) RTF=[\d.]+ utts=(\d+)$", evaluated.stdout, flags=re.M)
    page = (tmp_path / "out" / "RESULTS.md").read_text()
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in page.splitlines()
            if line.startswith("| few |") and "| ours |" in line]
    default = [row for row in rows if "the tools' default" in row[4]]
    assert len(default) == 1, rows
    assert (default[0][5], default[0][6], default[0][1]) == printed.groups(), (default[0], evaluated.stdout)
    assert default[0][4].startswith("lexicon search + word LM + second pass")  # the shipped model's decoding
    assert {row[4] for row in rows} >= {"first pass alone (`--no-rescore`)", "no word LM (`--greedy`)"}
    assert "(the shipped default)" in page and "**Accuracy only**" in page
