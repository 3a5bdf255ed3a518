"""Word n-gram language model built from training text, written as an ARPA file.

Interpolated modified Kneser-Ney (`asr.training.lm.kneser_ney`) over the text's own words, counted and estimated
as numpy arrays (`asr.training.lm.ngram`), so the same code serves a user's few hundred sentences and the
bundled LM's tens of millions of words (recipes/lm/build.py, which adds a fixed vocabulary, shards and a mixture).

With --min-count C, n-grams (n >= 2) seen fewer than C times are not listed (pruning keeps a large corpus's
model small). A reader then backs off for them, and each history's back-off weight is recomputed so that
p(. | h) still sums to one.

    python -m asr.training.lm --out lm.arpa [--min-count 2] TEXT_OR_MANIFEST [...]   (text: one sentence a line;
                                                                                      lm.arpa.gz: compressed)
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterable

from asr import cli
from asr.corpus.manifest import ManifestError, read_manifest
from asr.text.normalize import normalize
from asr.training.lm import kneser_ney
from asr.training.lm.ngram import BOS, EOS, MAX_ORDER, UNK, BackoffModel, arpa_text, write_arpa


def build_model(sentences: Iterable[str], order: int = 3, min_count: int = 1) -> BackoffModel:
    """The `order`-gram model of normalised `sentences` over their words, listing only the n-grams (n >= 2)
    seen at least `min_count` times."""
    split = [s.split() for s in sentences]
    words = [BOS, EOS, UNK] + sorted({w for s in split for w in s} - {BOS, EOS, UNK})
    ids = {w: i for i, w in enumerate(words)}
    counts = kneser_ney.count(kneser_ney.flatten([ids[w] for w in s] for s in split), order)
    return kneser_ney.prune_counts(kneser_ney.estimate(counts, words), counts, [min_count] * (order - 1))


def build_arpa(sentences: Iterable[str], order: int = 3, min_count: int = 1) -> str:
    """ARPA text of `build_model`."""
    return arpa_text(build_model(sentences, order, min_count))


def read_sentences(path: Path, split: str = "", skipped: list | None = None) -> list[str]:
    """Normalised sentences of a manifest (.jsonl: its `text` fields; with `split`, only rows of that split
    or of none; a line without usable text is a ManifestError, or left out into `skipped`, as `read_manifest`
    does it) or a text file (one a line)."""
    if path.suffix == ".jsonl":
        texts = [u.text for u in read_manifest(path, split, skipped=skipped)]
    else:
        texts = path.read_text(encoding="utf-8").splitlines()
    return [s for s in (normalize(t) for t in texts) if s]


def main(argv: list[str] | None = None) -> int:
    parser = cli.new_parser("asr.training.lm", __doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="+", type=Path, help="manifests (.jsonl) or text files")
    parser.add_argument("--out", type=Path, required=True, help="ARPA file to write")
    parser.add_argument("--order", type=int, default=3)
    parser.add_argument("--split", default="", help="from manifests with a `split` field, read only this split")
    parser.add_argument("--min-count", type=int, default=1, help="list only n-grams (n >= 2) seen this often")
    cli.add_skip_bad(parser, "read")
    args = parser.parse_args(argv)
    if not 1 <= args.order <= MAX_ORDER:
        parser.error(f"--order must be 1 to {MAX_ORDER}")
    sentences = []
    for source in args.sources:
        if not source.is_file():
            print(f"asr.training.lm: error: {source}: no such file", file=sys.stderr)
            return 1
        skipped = cli.skipping(args)
        try:
            sentences += read_sentences(source, args.split, skipped)
        except ManifestError as err:
            cli.error("training.lm", err)
            return 1
        cli.note_skipped("training.lm", source, skipped)
    write_arpa(build_model(sentences, args.order, args.min_count), args.out)
    print(f"{args.out}: {args.order}-gram model of {len(sentences)} sentences", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
