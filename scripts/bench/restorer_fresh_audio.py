"""Held-out audio that played no part in choosing the restorer: held-out sentences outside the check sets,
spoken by flite's held-out voice awb, as a folder that `scripts/bench/restorer_asr.py --check-sets` reads.

    python scripts/bench/restorer_fresh_audio.py --out data/restorer/fresh [--count 240]
    python scripts/bench/restorer_asr.py --check-sets data/restorer/fresh --cache data/restorer/fresh_asr.json \
        --restorer before=OLD.onnx --restorer after=asr/pretrained/restorer.onnx --out benchmarks/restorer/restorer_asr_fresh.md
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "recipes" / "restorer")]
from prepare import dev_transcripts, sentences  # noqa: E402

from asr.text.restore.labels import labelled  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--count", type=int, default=240)
    parser.add_argument("--text-dir", type=Path, default=ROOT.parent / "shared" / "data" / "text")
    parser.add_argument("--seed", type=int, default=20261127)
    args = parser.parse_args(argv)
    held = [(sid, line) for sid, line, is_held in sentences(args.text_dir, dev_transcripts(args.text_dir)) if is_held]
    checked = {Path(json.loads(line)["audio"]).stem for manifest in (ROOT / "benchmarks" / "check_sets").glob("*.jsonl")
               for line in manifest.read_text().splitlines()}
    pool = [(sid, line) for sid, line in held if sid not in checked and line[:1].isupper() and labelled(line) is not None
            and 4 <= len(line.split()) <= 25 and not any(c.isdigit() for c in line)]
    random.Random(args.seed).shuffle(pool)
    (args.out / "audio").mkdir(parents=True, exist_ok=True)
    rows = []
    for sid, line in pool[:args.count]:
        subprocess.run(["flite", "-voice", "awb", "-t", line, "-o", str(args.out / "audio" / f"{sid}.wav")], check=True)
        rows.append({"audio": f"audio/{sid}.wav", "text": line, "speaker": "flite-awb"})
    (args.out / "fresh.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    print(f"{len(rows)} clips of {len(pool)} usable held-out sentences outside the check sets -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
