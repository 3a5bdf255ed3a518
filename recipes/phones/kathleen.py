"""Split the Kathleen corpus by prompt: `python recipes/phones/kathleen.py` writes data/kathleen/kathleen.jsonl.

`../shared/data/kathleen/kathleen.jsonl` holds 1,620 recordings of 1,132 CMU ARCTIC prompts, many read twice, with
no split. Every recording of a prompt goes to the same side: a prompt is held out (split "test") when the CRC-32 of
its ARCTIC id ("arctic_a0001") falls in the last tenth, so no held-out sentence is ever heard in training.
The rows keep their fields, gain "split" and an absolute "audio" path (the manifest lives elsewhere), and the
training mixture reads them with `split: train` (conf/experiment/phones.yaml); Kathleen's own held-out
prompts are `--split test` of the same file.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HELD_OUT_TENTHS = 1  # of the prompts


def prompt_of(audio: str) -> str:
    """'audio/arctic_a0001_1592748574.opus' -> 'arctic_a0001'."""
    match = re.search(r"(arctic_[ab]\d{4})", audio)
    if not match:
        raise ValueError(f"{audio}: not a CMU ARCTIC recording name")
    return match.group(1)


def split_of(prompt: str) -> str:
    return "test" if zlib.crc32(prompt.encode()) % 10 < HELD_OUT_TENTHS else "train"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", type=Path, default=ROOT.parent / "shared" / "data" / "kathleen" / "kathleen.jsonl")
    p.add_argument("--out", type=Path, default=ROOT / "data" / "kathleen" / "kathleen.jsonl")
    a = p.parse_args(argv)
    if not a.source.is_file():
        p.error(f"{a.source}: no such manifest")
    rows = [json.loads(line) for line in a.source.read_text().splitlines() if line.strip()]
    for row in rows:
        row["split"] = split_of(prompt_of(row["audio"]))
        row["audio"] = str((a.source.parent / row["audio"]).resolve())
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text("".join(json.dumps(row) + "\n" for row in rows))
    for side in ("train", "test"):
        chosen = [r for r in rows if r["split"] == side]
        prompts = {prompt_of(r["audio"]) for r in chosen}
        print(f"{side}: {len(chosen)} recordings of {len(prompts)} prompts, "
              f"{sum(r['duration'] for r in chosen) / 3600:.2f} h", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
