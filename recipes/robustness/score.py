"""The robustness benchmark on an arm's period candidate, into the arm's progress row (recipes/robustness/README.md):

    python recipes/robustness/score.py --work runs/robustness/X --progress benchmarks/robustness/X.jsonl [--limit 100]

Runs `scripts/bench/robustness.py` on the candidate of the arm's newest period that has a row (`--work`/pNNN/
candidate.safetensors, as `recipes/voices/continue.py` left it), with the search settings the row was scored with,
decoding as the tools do (`--beam`: the word-LM search and its second pass; a model file alone would decode
without an LM), writes its figures into `--out` (default benchmarks/robustness/<arm>/pNNN), and adds to that row:
the mean ratio of degraded to clean WER over both sets (`robust_ratio`), each set's clean WER on the benchmark's subset
(`robust_libri_clean`, `robust_dev_clean`), the words a minute of noise alone (`noise_wpm`) and the subset's size
(`robust_limit`). `--shipped MODEL` scores the model the A/B started from instead, into the reference scores beside
the rows (`<rows>_reference.json`, which `continue.py --score-default` writes; `scripts/bench/ab.py` reads both).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETS = {"librispeech-dev-clean-2": "robust_libri_clean", "speechocean762-dev": "robust_dev_clean"}


def summary(figures: dict, limit: int) -> dict:
    """The row's fields from a robustness.json's figures (ours: system "asr")."""
    sets = figures["sets"]
    ratios = [sets[name]["mean_ratio"]["asr"] for name in SETS if name in sets]
    fields = {"robust_ratio": round(sum(ratios) / len(ratios), 3) if ratios else None, "robust_limit": limit}
    for name, key in SETS.items():
        if name in sets:
            fields[key] = round(100 * sets[name]["conditions"]["clean"]["systems"]["asr"]["wer"], 2)
    noise = figures.get("noise_alone", {}).get("total", {}).get("asr", {})
    fields["noise_wpm"] = noise.get("words_per_minute")
    return fields


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", type=Path, required=True, help="the arm's work folder (runs/robustness/X)")
    p.add_argument("--progress", type=Path, required=True, help="the arm's progress rows")
    p.add_argument("--limit", type=int, default=100, help="utterances a set (the benchmark's seeded subset)")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--out", type=Path, help="where the benchmark's files go (default: beside the rows)")
    p.add_argument("--shipped", type=Path, metavar="MODEL", help="score this model (the A/B's start) instead")
    a = p.parse_args(argv)
    rows = [json.loads(line) for line in a.progress.read_text().splitlines()] if a.progress.exists() else []
    if a.shipped:
        model, row, out = a.shipped, None, a.out or a.progress.parent / "shipped"
        if not model.exists():
            p.error(f"{model}: no such model")
    else:
        if not rows:
            p.error(f"{a.progress}: no rows yet (score the period with recipes/voices/continue.py first)")
        row = rows[-1]
        model = a.work / f"p{row['period']:03d}" / "candidate.safetensors"
        out = a.out or a.progress.parent / a.progress.stem / f"p{row['period']:03d}"
        if not model.exists():
            p.error(f"{model}: no such candidate")
    search = [f"--{key.replace('_', '-')}={value}" for key, value in (row or {}).get("search", {}).items()]
    command = [sys.executable, "scripts/bench/robustness.py", "--model", str(model), "--beam", "--limit", str(a.limit),
               "--peers", "none", "--jobs", str(a.jobs), "--out", str(out), "--allow-load", *search]
    print(f"score: $ {' '.join(command)}", flush=True)
    if subprocess.run(command, cwd=ROOT).returncode:
        sys.exit("score: error: the robustness benchmark failed; run the same command again")
    fields = summary(json.loads((out / "robustness.json").read_text())["figures"], a.limit)
    if row is None:
        reference = a.progress.with_name(f"{a.progress.stem}_reference.json")
        known = json.loads(reference.read_text()) if reference.exists() else {"date": date.today().isoformat()}
        reference.write_text(json.dumps({**known, **fields}, indent=1) + "\n")
    else:
        row.update(fields)
        a.progress.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"score: {json.dumps(fields)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
