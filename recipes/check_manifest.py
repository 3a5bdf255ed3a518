"""Prepare step for the sets that ship as manifests (speechocean762, FSDD), and a check for your own:

    python recipes/check_manifest.py ../shared/data/speechocean762/train.jsonl [--split train]

Every row must parse and name a readable audio file; prints utterances, hours and speakers. Rows
without a duration are counted by their audio headers and warned about: training reads those headers
at every start (`python -m asr.manifest` writes manifests with durations).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from asr.audio import AudioError  # noqa: E402
from asr.corpus.manifest import ManifestError, header_duration, read_manifest  # noqa: E402


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
        seconds, missing = 0.0, 0
        for utt in utts:
            try:
                duration = header_duration(utt.audio)  # reads every header: the file must open as audio
            except AudioError as err:
                print(f"error: {manifest}: {err}", file=sys.stderr)
                failed += 1
                continue
            missing += utt.duration is None
            seconds += duration if utt.duration is None else utt.duration
        if missing:
            print(f"warning: {manifest}: {missing} of {len(utts)} rows have no duration (counted here from the "
                  "audio headers, as training reads them at every start)", file=sys.stderr)
        speakers = len({u.speaker for u in utts})
        print(f"{manifest}: {len(utts)} utterances, {seconds / 3600:.2f} h, {speakers} speakers")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
