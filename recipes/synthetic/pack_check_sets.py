"""Pack the synthetic check sets into benchmarks/check_sets/: the one rendering every score is taken on.

    python recipes/synthetic/pack_check_sets.py [--from data/synthetic] [--out benchmarks/check_sets]

TTS output differs slightly from machine to machine (thread counts, float rounding), so scores on check
sets rendered anew would not compare across machines and periods. The rendering packed here is committed
instead: the same manifests (check.jsonl, check_kokoro_en.jsonl) with their audio as 16 kHz mono Ogg Opus
(about 28 kbit/s, ~7 MB for both sets). Packing again replaces the committed rendering: a new reference.
"""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import soundfile as sf

SETS = ("check.jsonl", "check_kokoro_en.jsonl")


def pack(source: Path, out: Path) -> None:
    rows = {name: [json.loads(line) for line in (source / name).read_text().splitlines()] for name in SETS}
    if out.exists():
        shutil.rmtree(out)
    for name, manifest in rows.items():
        for row in manifest:
            audio, rate = sf.read(source / row["audio"], dtype="float32")
            row["audio"] = str(Path(row["audio"]).with_suffix(".opus"))
            (out / row["audio"]).parent.mkdir(parents=True, exist_ok=True)
            sf.write(out / row["audio"], audio, rate, format="OGG", subtype="OPUS")
        (out / name).write_text("".join(json.dumps(r) + "\n" for r in manifest))
        print(f"pack_check_sets: {out / name}: {len(manifest)} utterances")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--from", dest="source", type=Path, default=Path("data/synthetic"))
    p.add_argument("--out", type=Path, default=Path("benchmarks/check_sets"))
    a = p.parse_args(argv)
    missing = [n for n in SETS if not (a.source / n).exists()]
    if missing:
        raise SystemExit(f"pack_check_sets: error: {a.source} has no {', '.join(missing)} "
                         "(render them with recipes/synthetic/prepare.py)")
    pack(a.source, a.out)


if __name__ == "__main__":
    main()
