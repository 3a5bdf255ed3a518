"""Peer recognizers, run as subprocess workers (scripts/bench/peer_worker.py) inside .venv-peers.

Each peer's hypotheses are kept per set in benchmarks/peers/<peer>/<set>.jsonl (one line per
utterance, keyed by the utterance's name), merged with earlier runs: a peer's output on fixed
audio does not change, so the full-set accuracy of a slow peer can come from an earlier (long)
run while each benchmark run re-measures its speed on a subset. Scoring always happens here,
with asr.text.normalize and asr.evaluate's scorer, for peers and ours alike.
"""
from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from bench.data import ROOT

PEERS = ("pocketsphinx", "whisper-tiny", "whisper-base", "moonshine")
PEER_PYTHON = ROOT / ".venv-peers" / "bin" / "python"
WORKER = Path(__file__).resolve().parent / "peer_worker.py"
LABELS = {"pocketsphinx": "PocketSphinx 5.1.1 (en-us, streaming)",
          "whisper-tiny": "Whisper tiny.en (faster-whisper int8, greedy)",
          "whisper-base": "Whisper base (faster-whisper int8, greedy)",
          "moonshine": "Moonshine base (moonshine-cpp)"}


@dataclass
class PeerRun:
    peer: str
    rows: dict[str, dict] = field(default_factory=dict)  # utterance name -> worker output (this run)
    error: str = ""


def available() -> tuple[dict[str, bool], dict[str, str]]:
    """Which peers load in .venv-peers ({peer: ok}, {peer: reason when not})."""
    if not PEER_PYTHON.is_file():
        why = "not installed (.venv-peers missing: run bash scripts/install_peers.sh)"
        return {p: False for p in PEERS}, {p: why for p in PEERS}
    done = subprocess.run([str(PEER_PYTHON), str(WORKER), "--check"], capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=600)
    ok, reasons = {}, {}
    for line in done.stdout.splitlines():
        row = json.loads(line)
        ok[row["peer"]] = row["ok"]
        if not row["ok"]:
            reasons[row["peer"]] = row["reason"]
    for peer in PEERS:
        if peer not in ok:
            ok[peer], reasons[peer] = False, (done.stderr.strip().splitlines() or ["check failed"])[-1]
    return ok, reasons


def run_peer(peer: str, manifest: Path, out: Path, rerun_limit: int, threads: int = 1) -> PeerRun:
    """Decode a prepared 16 kHz manifest (scripts/bench/data.write_wavs) with one peer."""
    names = [json.loads(line)["name"] for line in manifest.read_text().splitlines() if line.strip()]
    args = [str(PEER_PYTHON), str(WORKER), "--peer", peer, "--manifest", str(manifest), "--out", str(out),
            "--rerun-limit", str(rerun_limit), "--threads", str(threads)]
    done = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
    run = PeerRun(peer)
    if done.returncode != 0:
        run.error = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    if out.is_file():
        for name, line in zip(names, out.read_text().splitlines()):
            run.rows[name] = {**json.loads(line), "name": name}
    return run


def cache_path(folder: Path, peer: str, set_name: str) -> Path:
    return folder / peer / f"{set_name}.jsonl"


def load_cache(path: Path) -> dict[str, dict]:
    """Saved hypotheses {name: row}; rows from the worker's own manifests keep their original names."""
    rows = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows[row.get("name") or Path(row["audio"]).name] = row
    return rows


def save_cache(path: Path, rows: dict[str, dict]) -> None:
    """Merge-write: keep the saved rows, overwrite those measured again."""
    merged = {**load_cache(path), **rows}
    path.parent.mkdir(parents=True, exist_ok=True)
    keep = ("name", "ref", "hyp", "duration")  # timings are measured afresh in every run
    path.write_text("".join(json.dumps({k: r[k] for k in keep if k in r}) + "\n" for r in merged.values()))
