"""Build JSON Lines manifests from a LibriSpeech tree (for users who have the corpus).

    python recipes/librispeech/prepare.py --root /path/to/LibriSpeech --out data/librispeech

Expects <root>/<subset>/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt beside the .flac files
and writes <out>/<subset>.jsonl for every subset found (train-clean-100, dev-clean, ...).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from asr.manifest import write_manifest  # noqa: E402
from asr.text import normalize  # noqa: E402


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
            rows.append({"audio": os.path.relpath(audio.resolve(), out_dir.resolve()),
                         "duration": round(sf.info(str(audio)).duration, 3),
                         "text": normalize(text), "speaker": utt_id.split("-")[0]})
    return rows


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
    return 0


if __name__ == "__main__":
    sys.exit(main())
