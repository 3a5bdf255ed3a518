"""An A/B's starting state: `python recipes/crf/start.py` (recipes/crf/README.md), or with `--blob` and `--out`
another A/B's (recipes/robustness/README.md).

Writes `--out` (git-ignored; default `recipes/crf/start/`): the model shipped when the A/B began (git keeps it as
the blob `--blob`, default the CTC-CRF A/B's REFERENCE_BLOB, whatever the package ships now) as float16 weights,
and a `state.json` at period 0. Every arm's first `recipes/voices/continue.py --fork-from START --new-schedule`
period starts from it.
"""
from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCE_BLOB = "1ed07860c56f23080e9c79fddd991ec6d4c964bf"  # git's hash of asr/pretrained/default.safetensors then


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=ROOT / "recipes" / "crf" / "start")
    p.add_argument("--blob", default=REFERENCE_BLOB, help="git's hash of the shipped model file the A/B starts from")
    a = p.parse_args(argv)
    blob = subprocess.run(["git", "cat-file", "blob", a.blob], cwd=ROOT, capture_output=True)
    if blob.returncode:
        sys.exit(f"start: error: git has no blob {a.blob} (the A/B's shipped model): a full clone keeps it")
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "model.safetensors").write_bytes(blob.stdout)  # the shipped file is float16 already
    state = {"period": 0, "date": datetime.date.today().isoformat(), "steps": 0,
             "schedule": {"next_step_offset": 0, "rewarm_steps": 0}, "schedule_start": 0, "train_minutes": 0.0,
             "kokoro_slices": [], "kokoro_hours_seen": 0.0, "layers": 12, "candidate_carried": False,
             "start": {"from": "asr/pretrained/default.safetensors", "blob": a.blob}}
    (a.out / "state.json").write_text(json.dumps(state, indent=1) + "\n")
    print(f"start: {a.out} (the shipped model, blob {a.blob[:10]})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
