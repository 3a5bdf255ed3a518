"""Peer recognizers, run as subprocess workers (scripts/bench/peer_worker.py) inside .venv-peers, and scored against
ours on the same utterances.

Each peer's hypotheses are kept per set in benchmarks/peers/<peer>/<set>.jsonl (one line per
utterance, keyed by the utterance's name), merged with earlier runs (a run writing the committed figures adds its
own; any run reads them): a peer's output on fixed
audio does not change, so the full-set accuracy of a slow peer can come from an earlier (long)
run while each benchmark run re-measures its speed on a subset. Scoring always happens here,
with asr.text.normalize and asr.evaluate's scorer, against the references of our own rows.
"""
from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from asr.corpus.evaluation import summarize
from asr.corpus.scoring import UttResult, score
from asr.text.normalize import normalize

from bench.data import ROOT
from bench.ours import percentiles

PEERS = ("pocketsphinx", "whisper-tiny", "whisper-base", "moonshine")
DEFAULT = ("whisper-tiny", "whisper-base")  # the peers the benchmark runs unless --peers says otherwise
PEER_PYTHON = ROOT / ".venv-peers" / "bin" / "python"
WORKER = Path(__file__).resolve().parent / "peer_worker.py"
LABELS = {"pocketsphinx": "PocketSphinx 5.1.1 (en-us, streaming)",
          "whisper-tiny": "Whisper tiny.en (faster-whisper int8, greedy)",
          "whisper-base": "Whisper base (faster-whisper int8, greedy)",
          "moonshine": "Moonshine base (moonshine-cpp)"}


@dataclass
class PeerRun:
    peer: str
    rows: dict[str, dict[str, dict]] = field(default_factory=dict)  # set -> utterance name -> worker output
    error: str = ""  # why the worker failed (rows may still hold what it did before)


def installed() -> str:
    """'' when .venv-peers exists, else why no peer can run."""
    return "" if PEER_PYTHON.is_file() else "not installed (.venv-peers missing: run bash scripts/install_peers.sh)"


ROWS_PER_WORKER = 100  # moonshine-cpp keeps ~35 MB per utterance and freeing its model does not return it


def run_peer(peer: str, manifest: Path, out: Path, rerun_limit: int, threads: int = 1) -> PeerRun:
    """Decode a manifest of 16 kHz wav rows (with "set" and "name") with one peer, in worker processes of
    at most ROWS_PER_WORKER rows each, so a leaking peer library cannot exhaust the machine's memory.
    The re-run cost is measured in the first worker only (the first `rerun_limit` rows of each of its sets)."""
    lines = manifest.read_text().splitlines()
    run = PeerRun(peer)
    for start in range(0, len(lines), ROWS_PER_WORKER):
        part, part_out = manifest.with_suffix(f".{start}.jsonl"), out.with_suffix(f".{start}.jsonl")
        part.write_text("".join(line + "\n" for line in lines[start:start + ROWS_PER_WORKER]))
        args = [str(PEER_PYTHON), str(WORKER), "--peer", peer, "--manifest", str(part), "--out", str(part_out),
                "--rerun-limit", str(rerun_limit if start == 0 else 0), "--threads", str(threads)]
        done = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
        if part_out.is_file():
            for line in part_out.read_text().splitlines():
                row = json.loads(line)
                run.rows.setdefault(row["set"], {})[row["name"]] = row
        if done.returncode != 0:
            run.error = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            break
    return run


def cache_path(folder: Path, peer: str, set_name: str) -> Path:
    return folder / peer / f"{set_name}.jsonl"


def load_cache(path: Path) -> dict[str, dict]:
    """Saved hypotheses {utterance name: row} (a line that does not parse or has no name is ignored)."""
    rows = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if row.get("name") and "hyp" in row:
                rows[row["name"]] = row
    return rows


def save_cache(path: Path, rows: dict[str, dict]) -> None:
    """Merge-write: keep the saved rows, overwrite those measured again."""
    merged = {**load_cache(path), **rows}
    path.parent.mkdir(parents=True, exist_ok=True)
    keep = ("name", "ref", "hyp", "duration")  # timings are measured afresh in every run
    path.write_text("".join(json.dumps({k: r[k] for k in keep if k in r}) + "\n" for r in merged.values()))


def scored(audio: str, ref: str, duration: float, hyp: str) -> UttResult:
    """A peer's hypothesis for an utterance scored as asr.evaluate scores ours: both sides normalised."""
    ref, hyp = normalize(ref), normalize(hyp)
    words, chars, _ = score(ref, hyp)
    return UttResult(audio, ref, hyp, duration, 0.0, words, chars)


def compare(run: PeerRun, set_name: str, ours: dict[str, UttResult], cache: Path | None, save: bool) -> dict:
    """One peer on one set (this run's hypotheses plus the saved ones in `cache`, which this run's join where `save`)
    against `ours` (our default row's results, by utterance name) on the utterances both decoded."""
    live_rows = run.rows.get(set_name, {})
    saved = {}
    if cache:
        path = cache_path(cache, run.peer, set_name)
        if save:
            save_cache(path, live_rows)
        saved = load_cache(path)
    hyps = {**saved, **live_rows}
    names = [name for name in ours if name in hyps]
    peer = summarize([scored(name, ours[name].ref, ours[name].duration, hyps[name]["hyp"]) for name in names], [])
    mine = summarize([ours[name] for name in names], [])
    live = list(live_rows.values())
    chunk_ms = [t for r in live for t in r.get("chunk_ms", [])]
    rerun = [r for r in live if "rerun_ms" in r]
    live_audio = sum(r["duration"] for r in live)
    row = {"set": set_name, "peer": run.peer, "utts": len(names), "audio_s": peer["audio_seconds"],
           "live_utts": len(live), "mode": "streaming, 500 ms chunks" if chunk_ms else "whole utterance",
           "peer_wer": peer["wer"], "peer_cer": peer["cer"], "ours_wer": mine["wer"], "ours_cer": mine["cer"],
           "rtf": sum(r["compute_s"] for r in live) / live_audio if live_audio else None,
           "chunk_ms": percentiles(chunk_ms), "rerun_ms": percentiles([t for r in rerun for t in r["rerun_ms"]]),
           "rerun_utts": len(rerun), "error": run.error}
    if rerun:
        row["rerun_rtf"] = sum(sum(r["rerun_ms"]) for r in rerun) / 1000 / sum(r["duration"] for r in rerun)
    return row


def run_all(peers: list[str], status: dict[str, str], sets: list[tuple[str, Path, dict[str, UttResult]]],
            work: Path, rerun_limit: int, cache: Path | None, save: bool, log=print) -> list[dict]:
    """Each requested peer (`status` "requested"; set to what happened) decodes the sets' wav manifests
    (`bench.data.write_wavs`'s, each with our default row's results by name) in worker processes; one comparison
    per peer and set. `save`: this run's hypotheses join the saved ones in `cache` (read either way)."""
    manifest = work / "peers.jsonl"
    with manifest.open("w") as f:
        for set_name, wavs, _ in sets:
            for line in wavs.read_text().splitlines():
                f.write(json.dumps({**json.loads(line), "set": set_name}) + "\n")
    comparisons = []
    for peer in peers:
        if status[peer] != "requested":
            continue
        log(f"peer {peer}")
        run = run_peer(peer, manifest, work / f"{peer}.out.jsonl", rerun_limit)
        if run.error and not run.rows:
            status[peer] = f"skipped: {run.error}"
            continue
        status[peer] = "ran" + (f" (stopped early: {run.error})" if run.error else "")
        comparisons += [compare(run, set_name, ours, cache, save) for set_name, _, ours in sets]
    return comparisons
