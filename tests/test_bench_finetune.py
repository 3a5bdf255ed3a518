"""scripts/bench/finetune.py end to end on its smoke settings: a few rendered domain sentences, a step cap, a
small random model; the report has the held-out and the general-speech tables (its figures mean nothing)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import DATA, ROOT


@pytest.mark.skipif(not shutil.which("flite") or not (DATA / "speechocean762" / "dev.jsonl").is_file(),
                    reason="needs flite (scripts/setup.sh) and the shared dev sets")
def test_the_finetune_bench_smoke_run_writes_its_report(model_path: Path, small_lm: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "finetune.py"), "--smoke", "--cases",
                           "domain", "--model", str(model_path), "--work", str(work), "--minutes", "0.5",
                           "--threads", "1", "--lm", str(small_lm)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = (work / "finetune.md").read_text()  # a smoke run writes beside its work, never into benchmarks/
    assert "| domain (flite awb) | 12 utts" in report and "| starting model |" in report
    assert "| after domain (flite awb) |" in report and "speechocean762 dev beam" in report
    record = json.loads((work / "finetune.json").read_text())
    assert record["cases"]["domain (flite awb)"]["training"]["steps"] == 2
    assert len(list((work / "domain" / "corpus" / "awb").glob("*.wav"))) == 24
