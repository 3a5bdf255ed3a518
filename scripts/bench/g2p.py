"""The G2P's speed and the cost of a phone lexicon, torch-free, at one thread:

    python scripts/bench/g2p.py [--lexicon data/lexicon/cmudict.txt] [--vocab FILE] [--g2p FILE]

Prints: the G2P file's size; one word at a time (median and p95 ms over 200 words of the vocabulary); the whole
vocabulary's words that the lexicon lacks, spelled in batches as `asr.training.g2p.lexicon --cover` and a phone
model's search do (`Lexicon.fill`: words per second); loading the lexicon and a phone tokenizer's bytes.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from asr.text.g2p import FILE, load_g2p  # noqa: E402
from asr.text.lexicon import Lexicon  # noqa: E402
from asr.text.tokenizer import Tokenizer  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lexicon", type=Path, default=ROOT / "data" / "lexicon" / "cmudict.txt")
    p.add_argument("--vocab", type=Path, default=ROOT.parent / "shared" / "data" / "lexicon" / "librispeech-vocab.txt")
    p.add_argument("--g2p", type=Path, default=ROOT / "asr" / "pretrained" / FILE)
    p.add_argument("--limit", type=int, default=0, help="spell only the first N missing words (0: all)")
    a = p.parse_args(argv)
    g2p = load_g2p(a.g2p)
    print(f"G2P {a.g2p.name}: {a.g2p.stat().st_size / 1e6:.2f} MB, {g2p.cfg}")
    start = time.perf_counter()
    lexicon = Lexicon.load(a.lexicon, g2p=g2p)
    print(f"lexicon {a.lexicon.name}: {len(lexicon)} words, loaded in {time.perf_counter() - start:.2f} s")
    vocab = [line.split()[0] for line in a.vocab.read_text().splitlines() if line.split()]
    missing = [w for w in vocab if w not in lexicon]
    singles = []
    for word in missing[:200]:
        start = time.perf_counter()
        g2p.phones(word)
        singles.append(1000 * (time.perf_counter() - start))
    singles.sort()
    print(f"one word at a time: median {statistics.median(singles):.2f} ms, p95 {singles[int(0.95 * len(singles))]:.2f} ms "
          f"({len(singles)} words)")
    todo = missing[:a.limit] if a.limit else missing
    start = time.perf_counter()
    added = lexicon.fill(todo)
    seconds = time.perf_counter() - start
    print(f"{a.vocab.name}: {len(vocab)} words, {len(missing)} not in the lexicon; {added} spelled in batches in "
          f"{seconds:.1f} s ({added / seconds:.0f} words/s)")
    tokenizer = Tokenizer("phone").with_lexicon(lexicon)
    start = time.perf_counter()
    data = tokenizer.to_bytes()
    written = time.perf_counter() - start
    start = time.perf_counter()
    Tokenizer.from_bytes(data)
    print(f"a phone tokenizer with that lexicon: {len(data) / 1e6:.2f} MB of bytes, written in {written:.2f} s, "
          f"read in {time.perf_counter() - start:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
