"""The benchmark's smoke version end to end, its peer and robustness parts, and the smaller benches on small sizes."""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, tone, write
from helpers import DATA

SHARED_DEV = DATA / "speechocean762" / "dev.jsonl"


def _env() -> dict[str, str]:
    return dict(os.environ, OMP_NUM_THREADS="1", MPLBACKEND="Agg")


@pytest.fixture
def tone_manifest(tmp_path: Path) -> Path:
    """A three-utterance manifest of tones, for machines without the shared dev sets."""
    rows = []
    for i in range(3):
        write(tmp_path / f"t{i}.wav", tone(1.2 + 0.4 * i, freq=300.0 + 100 * i, seed=i))
        rows.append(json.dumps({"audio": f"t{i}.wav", "duration": 1.2 + 0.4 * i, "text": "hello world"}))
    (tmp_path / "tones.jsonl").write_text("\n".join(rows) + "\n")
    return tmp_path / "tones.jsonl"


def _number(cell: str) -> float:
    return float(re.match(r"[+-]?[\d.]+", cell.strip()).group())


def _rows(markdown: str, heading: str) -> list[list[str]]:
    """Body rows of the first table after `heading`, as lists of cells."""
    lines = markdown.split(heading, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines[start + 2:end]]


def test_benchmark_smoke_writes_results(model_path: Path, tone_manifest: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench"
    args = [sys.executable, str(ROOT / "scripts" / "benchmark.py"), "--smoke", "--model", str(model_path),
            "--out", str(out), "--peer-cache", "none", "--robustness", "none"]
    if not SHARED_DEV.is_file():
        args += ["--manifest", str(tone_manifest)]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, env=_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| target | measured | goal | met |" in done.stdout
    results = (out / "RESULTS.md").read_text()
    assert "Smoke run" in results and "untrained" in results
    digest = hashlib.sha256(model_path.read_bytes()).hexdigest()
    assert f"sha256 `{digest}`" in results and "(the shipped default)" not in results  # the model, by its hash
    targets = {row[0]: row for row in _rows(results, "## Targets")}
    p95 = targets["streaming compute p95 per 500 ms chunk (the default decoding, as asr.stream runs it), 1 thread"]
    assert _number(p95[1]) > 0
    assert _number(targets["end of speech -> final, median"][1]) > 0
    assert 0 < _number(targets["streaming RTF, 1 thread"][1]) < 10
    memory = [row for name, row in targets.items() if name.startswith("peak RSS growth")]
    assert memory and memory[0][3] in ("yes", "NO")
    accuracy = _rows(results, "## 1. Accuracy")
    for row in accuracy:
        assert int(row[1]) >= 1 and 0 <= _number(row[5]) and 0 <= _number(row[6])
    by_set: dict[str, dict[str, list[str]]] = {}
    for row in accuracy:
        by_set.setdefault(row[0], {})["streamed" if "(`--streaming`)" in row[4] else row[4]] = row[5:7]
    for name, rows in by_set.items():  # a model of one's own decodes greedily: the default and its stream alone
        default = next(key for key in rows if key.startswith("greedy CTC: the tools' default"))
        assert set(rows) == {default, "streamed"}, rows
        assert rows["streamed"] == rows[default], name  # asr.stream's text is asr.transcribe's
    latency = _rows(results, "## 3. Streaming latency")
    assert latency[-1][0] == "all" and all(_number(x) >= 0 for x in latency[-1][1].split("/"))
    memory_rows = _rows(results, "## 5. Memory")
    assert [_number(r[0]) for r in memory_rows] == [0.05, 0.1] and all(_number(r[2]) > 0 for r in memory_rows)
    presets = _rows(results, "(`conf/attention/*.yaml`)")
    assert {r[0] for r in presets} >= {"w50_h4", "full"}
    assert "No peer ran in this run" in results and "not requested" in results  # no peers in the smoke run
    data = json.loads((out / "results.json").read_text())
    assert data["sets"] and data["scaling"][0]["seconds"] > 0 and data["meta"]["model"]["sha256"] == digest


def test_bench_attention_small_sizes() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "attention.py"), "--minutes", "0.05", "0.1",
                           "--max-gb", "0.0015", "--json"], cwd=ROOT, capture_output=True, text=True,
                          env=_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    windowed = [r for r in rows if r["mode"] == "window 50"]
    assert [r["minutes"] for r in windowed] == [0.05, 0.1]
    assert all(r["seconds"] > 0 and r["peak_mb"] is not None and r["encoder_frames"] > 0 for r in windowed)
    full = {r["minutes"]: r for r in rows if r["mode"] == "full"}
    assert full[0.05]["seconds"] > 0  # fits: run
    assert full[0.1]["seconds"] is None and "not run" in full[0.1]["note"]  # over the limit: skipped, said why


FSDD = DATA / "fsdd" / "fsdd.jsonl"


@pytest.mark.skipif(not FSDD.is_file(), reason=f"{FSDD} not found")
def test_benchmark_stream_loop_equals_whole_utterance_on_trimmed_digits() -> None:
    """FSDD clips end right at the digit, so a streaming loop that forgets the end-of-input tail
    loses final letters there (14.0% WER against 10.8% whole-utterance, before the fix)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench.ours import recognize, stream_clip

    from asr.audio.files import load_audio
    from asr.corpus.manifest import read_manifest
    from asr.decoding.decoder import Decoder
    from asr.model.recognizer import Recognizer

    recognizer = Recognizer.load()
    greedy = Decoder(recognizer.tokenizer)
    for utt in read_manifest(FSDD, "test")[:120]:
        wave = load_audio(utt.audio)
        assert stream_clip(recognizer, greedy, wave, 8000)[0] == recognize(recognizer, wave, greedy), utt.audio


def test_a_peer_is_run_in_workers_of_bounded_size(tmp_path: Path, monkeypatch) -> None:
    """A leaking peer library (moonshine-cpp) must not live for a whole long set: run_peer hands each
    worker process at most ROWS_PER_WORKER rows, collects every row, and measures re-runs in the first only."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench import peers
    fake = tmp_path / "worker.py"  # writes each row back with the worker's pid and its --rerun-limit
    fake.write_text("import argparse, json, os\n"
                    "p = argparse.ArgumentParser(); [p.add_argument(a) for a in ('--peer', '--manifest', '--out', '--rerun-limit', '--threads')]\n"
                    "a = p.parse_args()\n"
                    "with open(a.out, 'w') as out:\n"
                    "    for line in open(a.manifest):\n"
                    "        row = json.loads(line)\n"
                    "        out.write(json.dumps({**row, 'hyp': 'X', 'pid': os.getpid(), 'rerun': int(a.rerun_limit)}) + '\\n')\n")
    monkeypatch.setattr(peers, "PEER_PYTHON", Path(sys.executable))
    monkeypatch.setattr(peers, "WORKER", fake)
    manifest = tmp_path / "peers.jsonl"
    names = [f"u{i}" for i in range(250)]
    manifest.write_text("".join(json.dumps({"audio": "a.wav", "set": "dev" if i < 200 else "check", "name": n}) + "\n"
                                for i, n in enumerate(names)))
    run = peers.run_peer("moonshine", manifest, tmp_path / "out.jsonl", rerun_limit=3)
    rows = {**run.rows["dev"], **run.rows["check"]}
    assert run.error == "" and sorted(rows) == sorted(names)
    by_worker: dict[int, list[dict]] = {}
    for row in rows.values():
        by_worker.setdefault(row["pid"], []).append(row)
    assert sorted(len(r) for r in by_worker.values()) == [50, peers.ROWS_PER_WORKER, peers.ROWS_PER_WORKER]
    assert sorted({r["rerun"] for r in w} == {3} for w in by_worker.values()) == [False, False, True]


def test_a_peer_is_scored_against_our_default_on_the_utterances_both_decoded(tmp_path: Path) -> None:
    """bench.peers.compare: a peer's live and saved hypotheses against our default row's results, both normalised;
    only a run that writes the committed figures (`save`) adds its hypotheses to the saved ones."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench import peers

    from asr.corpus.scoring import UttResult, score
    ours = {}
    for name, ref, hyp in (("a.wav", "THE CAT SAT", "THE CAT SAT"), ("b.wav", "A DOG RAN", "A DOG"),
                           ("c.wav", "NOBODY ELSE", "NOBODY ELSE")):
        words, chars, _ = score(ref, hyp)
        ours[name] = UttResult(name, ref, hyp, 1.0, 0.1, words, chars)
    cache = tmp_path / "peers"
    peers.save_cache(peers.cache_path(cache, "whisper-tiny", "dev"),
                     {"b.wav": {"name": "b.wav", "ref": "x", "hyp": "A dog ran.", "duration": 1.0}})
    run = peers.PeerRun("whisper-tiny", {"dev": {"a.wav": {"name": "a.wav", "hyp": "The bat sat.", "duration": 1.0,
                                                           "compute_s": 0.5}}})
    row = peers.compare(run, "dev", ours, cache, save=False)
    assert (row["utts"], row["live_utts"], row["mode"]) == (2, 1, "whole utterance")  # c.wav: the peer never heard it
    assert row["peer_wer"] == 1 / 6 and row["ours_wer"] == 1 / 6 and row["rtf"] == 0.5
    assert set(peers.load_cache(peers.cache_path(cache, "whisper-tiny", "dev"))) == {"b.wav"}  # not saved
    peers.compare(run, "dev", ours, cache, save=True)
    assert set(peers.load_cache(peers.cache_path(cache, "whisper-tiny", "dev"))) == {"a.wav", "b.wav"}


def test_results_take_the_robustness_tables_where_their_json_is(tmp_path: Path, monkeypatch) -> None:
    """bench.sections.robustness: the robustness benchmark's page, rendered from its JSON by its own renderer, as a
    section of RESULTS.md (its headings one level down, its plot linked from the page's folder); none without it."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench import robustness_report, sections
    folder, out = tmp_path / "benchmarks" / "robustness", tmp_path / "benchmarks"
    folder.mkdir(parents=True)
    assert sections.robustness(folder, out) is None
    (folder / "robustness.json").write_text(json.dumps({"figures": {}}))
    (folder / "robustness.png").write_bytes(b"png")
    monkeypatch.setattr(robustness_report, "markdown", lambda record: ["# Robustness", "", "Measured.", "",
                                                                         "## dev (2 utterances)", "", "| a |", ""])
    title, text = sections.robustness(folder, out)
    assert title.startswith("14. Robustness") and "robustness.json" in title
    assert text.splitlines() == ["Measured.", "", "### dev (2 utterances)", "", "| a |", "",
                                 "![ratio to clean per condition](robustness/robustness.png)"]


def test_results_take_the_newest_word_lm_costs_page(tmp_path: Path) -> None:
    """bench.sections.newest_lm_page: of the pages scripts/bench/lm.py wrote under their own names, the newest by
    the dates in their JSON; other JSON beside them is not one."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench import sections
    assert sections.newest_lm_page(tmp_path) is None
    for name, date in (("lm", "2026-12-03 12:59"), ("lm_load", "2026-12-07 00:33"), ("old", "2026-11-30 09:00")):
        (tmp_path / f"{name}.json").write_text(json.dumps({"date": date, "lm": {}}))
        (tmp_path / f"{name}.md").write_text(f"# {name}\n")
    (tmp_path / "memory.json").write_text(json.dumps({"date": "2027-01-01", "audio_s": 30}))  # not the LM bench's
    (tmp_path / "memory.md").write_text("# memory\n")
    assert sections.newest_lm_page(tmp_path) == tmp_path / "lm_load.md"


def test_ceiling_bench_on_a_few_rows(tmp_path: Path) -> None:
    """scripts/bench/ceiling.py on small sizes: every row's cost is positive, the model's share is part of
    it, and each bound is cores x 500 ms over the costs it counts."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "ceiling.py"), "--rows", "1", "3",
                           "--seconds", "2", "--clients", "2", "--socket-seconds", "2", "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, env=_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "serve_ceiling.json").read_text())
    sockets, cores = result["sockets"], result["cpus"]
    assert sockets["events"] > 0 and sockets["cpu_ms_per_chunk"] > 0 and sockets["clients_cpu_ms_per_chunk"] > 0
    assert [r["rows"] for r in result["recognition"]] == [1, 3]
    for r in result["recognition"]:
        assert 0 < r["features_and_model_ms"] < r["cpu_ms_per_chunk"]
        served = r["cpu_ms_per_chunk"] + sockets["cpu_ms_per_chunk"]
        assert r["bound_streams"] == int(cores * 500 / served)
        assert r["bound_streams_with_clients"] == int(cores * 500 / (served + sockets["clients_cpu_ms_per_chunk"]))
    assert "| 3 |" in (tmp_path / "serve_ceiling.md").read_text()


@pytest.mark.skipif(not SHARED_DEV.is_file(), reason="needs ../shared/data")
def test_finals_bench_compares_two_models_at_two_trailing_silences() -> None:
    """scripts/bench/finals.py: one row per model and trailing silence, each utterance endpointed or not."""
    from asr.model.onnx_backend import default_onnx_dir
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "finals.py"), "--limit", "1",
                           "--baseline", str(default_onnx_dir()), "--trailing-silence", "0.4", "0.2"],
                          cwd=ROOT, capture_output=True, text=True, env=_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in done.stdout.splitlines()[2:]]
    assert [(r[0] != "bundled", r[1]) for r in rows] == [(False, "0.4"), (False, "0.2"), (True, "0.4"), (True, "0.2")]
    for row in rows:
        median, p95 = (float(x) for x in row[2].split("/"))
        endpointed, not_endpointed = (int(x) for x in row[3].split("/"))
        assert 0 < median <= p95 < 3 and endpointed >= 1 and endpointed + not_endpointed <= 2
