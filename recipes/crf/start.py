"""The CTC-CRF A/B's starting state (recipes/crf/README.md): `python recipes/crf/start.py`.

Writes `recipes/crf/start/` (git-ignored): the phone model shipped when the A/B began (git keeps it as the blob
REFERENCE_BLOB, whatever the package ships now) as float16 weights, and a `state.json` at period 0. Every arm's
first `recipes/voices/continue.py --fork-from recipes/crf/start --new-schedule` period starts from it.
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
    a = p.parse_args(argv)
    blob = subprocess.run(["git", "cat-file", "blob", REFERENCE_BLOB], cwd=ROOT, capture_output=True)
    if blob.returncode:
        sys.exit(f"start: error: git has no blob {REFERENCE_BLOB} (the A/B's shipped model): a full clone keeps it")
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "model.safetensors").write_bytes(blob.stdout)  # the shipped file is float16 already
    state = {"period": 0, "date": datetime.date.today().isoformat(), "steps": 0,
             "schedule": {"next_step_offset": 0, "rewarm_steps": 0}, "schedule_start": 0, "train_minutes": 0.0,
             "kokoro_slices": [], "kokoro_hours_seen": 0.0, "layers": 12, "candidate_carried": False,
             "start": {"from": "asr/pretrained/default.safetensors", "blob": REFERENCE_BLOB}}
    (a.out / "state.json").write_text(json.dumps(state, indent=1) + "\n")
    print(f"start: {a.out} (the shipped phone model, blob {REFERENCE_BLOB[:10]})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
