"""Build JSON Lines manifests from a LibriSpeech tree (for users who have the corpus).

    python recipes/librispeech/prepare.py --root /path/to/LibriSpeech --out data/librispeech

Expects <root>/<subset>/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt beside the .flac files
and writes <out>/<subset>.jsonl for every subset found (train-clean-100, dev-clean, ...), then
<out>/train.jsonl: every training subset in <out> (train-*.jsonl, from this run or an earlier one),
which `experiment=librispeech` trains on, so it trains on whichever subsets were prepared.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from asr.audio.files import audio_duration  # noqa: E402
from asr.corpus.manifest import relative_audio, write_manifest  # noqa: E402
from asr.text.normalize import normalize  # noqa: E402

TRAIN, VALID = "train.jsonl", "dev-clean.jsonl"  # what conf/experiment/librispeech.yaml reads from <out>


def subset_rows(subset_dir: Path, out_dir: Path) -> list[dict]:
    """One manifest row per transcript line of a subset, audio relative to out_dir."""
    rows = []
    for trans in sorted(subset_dir.glob("*/*/*.trans.txt")):
        for line in trans.read_text().splitlines():
            utt_id, _, text = line.partition(" ")
            audio = trans.parent / f"{utt_id}.flac"
            if not audio.is_file():
                print(f"warning: {audio} missing, skipped", file=sys.stderr)
                continue
            rows.append({"audio": relative_audio(audio, out_dir), "duration": round(audio_duration(audio), 3),
                         "text": normalize(text), "speaker": utt_id.split("-")[0]})
    return rows


def write_training_set(out_dir: Path) -> list[str]:
    """<out>/train.jsonl from every train-*.jsonl in out_dir; the subsets it holds."""
    subsets = sorted(out_dir.glob("train-*.jsonl"))
    if subsets:
        write_manifest(out_dir / TRAIN, [json.loads(line) for path in subsets
                                         for line in path.read_text().splitlines() if line.strip()])
    return [path.stem for path in subsets]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", required=True, type=Path, help="the LibriSpeech folder")
    parser.add_argument("--out", default=Path("data/librispeech"), type=Path)
    args = parser.parse_args(argv)
    subsets = sorted(p for p in args.root.iterdir() if p.is_dir()) if args.root.is_dir() else []
    if not subsets:
        print(f"error: {args.root}: no LibriSpeech subsets found", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    for subset in subsets:
        rows = subset_rows(subset, args.out)
        if rows:
            write_manifest(args.out / f"{subset.name}.jsonl", rows)
            hours = sum(r["duration"] for r in rows) / 3600
            print(f"{subset.name}: {len(rows)} utterances, {hours:.2f} h")
    training = write_training_set(args.out)
    if training:
        print(f"{TRAIN}: {' + '.join(training)}")
    else:
        print(f"warning: no training subset (train-clean-100, train-clean-360, train-other-500) in {args.out}: "
              f"experiment=librispeech trains on {args.out / TRAIN}", file=sys.stderr)
    if not (args.out / VALID).is_file():
        print(f"warning: no {VALID} in {args.out}: experiment=librispeech validates on it (prepare dev-clean, "
              "or point data.valid at another manifest)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
