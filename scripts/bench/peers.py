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
