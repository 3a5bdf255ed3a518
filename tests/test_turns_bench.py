"""scripts/bench/turns.py: the turn-taking benchmark, its pieces and a tiny run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from asr.decoding.endpoint import EndpointConfig
from conftest import ROOT
from helpers import DATA

sys.path.insert(0, str(ROOT / "scripts"))
from bench import turns  # noqa: E402

SHARED_DEV = DATA / "speechocean762" / "dev.jsonl"


def test_rules_by_name() -> None:
    assert turns.rule("fixed=0.4") == EndpointConfig.fixed(0.4)
    assert turns.rule("default") == EndpointConfig()
    cfg = turns.rule("lm=0.3,1.0,-2")
    assert (cfg.sentence_end_silence, cfg.mid_phrase_silence, cfg.sentence_end_logprob) == (0.3, 1.0, -2.0)
    for bad in ("lm=0.3", "fixed=-1", "nothing"):
        with pytest.raises(ValueError):
            turns.rule(bad)


def test_a_cut_is_placed_in_the_reference_by_the_alignment() -> None:
    ref = "THE CAT SAT ON THE MAT"
    assert turns.ref_position(ref, "THE CAT SAT ON THE MAT", 3) == 3
    assert turns.ref_position(ref, "THE BAT SAT ON THE MAT", 2) == 2  # a substitution before the cut
    assert turns.ref_position(ref, "THE CAT SAT UH ON THE MAT", 4) == 3  # an inserted word right before it
    assert turns.ref_position(ref, "THE CAT ON THE MAT", 2) == 2  # SAT left out right at the cut: after it
    assert turns.ref_position(ref, "THE CAT ON THE MAT", 3) == 4


def test_sentence_ends_of_a_reference_by_the_restorer() -> None:
    class Restorer:
        def labels(self, words, pauses=None):
            marks = [0] * len(words)
            marks[words.index("SAT")] = turns.ENDS[0]
            return [0] * len(words), marks

    assert turns.sentence_ends(Restorer(), "THE CAT SAT THE DOG RAN".split()) == {3, 6}


@pytest.mark.skipif(not SHARED_DEV.is_file(), reason="needs ../shared/data")
def test_a_tiny_run_of_two_rules(tmp_path: Path) -> None:
    out = tmp_path / "turns.json"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "turns.py"), "--limit", "1",
                           "--rules", "fixed=0.4", "default", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"),
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 4  # two sets, two rules
    record = json.loads(out.read_text())
    for figures in record["results"].values():
        assert 0 <= figures["whole"]["wer"]
        for name in ("fixed=0.4", "default"):
            row = figures[name]
            assert row["n"] + row["not_endpointed"] == 1 and row["cuts_inside_sentence"] <= row["cuts"]
            if row["n"]:
                assert 0 < row["median_s"] <= row["p95_s"] < 3.5
                assert row["rule_median_s"] > 0 and row["chunk_median_s"] >= 0
        assert figures["fixed=0.4"]["rule_median_s"] == pytest.approx(0.4, abs=0.041)  # the fixed rule: its own wait
