"""Prepare step for the sets that ship as manifests (speechocean762, FSDD): check and summarise.

    python recipes/check_manifest.py ../shared/data/speechocean762/train.jsonl [--split train]

Every row must parse and name a readable audio file; prints utterances, hours and speakers.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from asr.manifest import ManifestError, read_manifest  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("manifests", nargs="+", type=Path)
    parser.add_argument("--split", default="", help="keep rows whose 'split' equals this")
    args = parser.parse_args(argv)
    failed = 0
    for manifest in args.manifests:
        try:
            utts = [u for u in read_manifest(manifest) if not args.split or u.split == args.split]
        except ManifestError as err:
            print(f"error: {err}", file=sys.stderr)
            failed += 1
            continue
        for utt in utts:
            try:
                sf.info(str(utt.audio))
            except Exception as err:  # soundfile raises several types
                print(f"error: {utt.audio}: {err}", file=sys.stderr)
                failed += 1
        hours = sum(u.duration for u in utts) / 3600
        print(f"{manifest}: {len(utts)} utterances, {hours:.2f} h, {len({u.speaker for u in utts})} speakers")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
