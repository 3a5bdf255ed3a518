"""Word n-gram language model built from training text, written as an ARPA file.

Interpolated absolute discounting (one discount per order, D = n1 / (n1 + 2 n2)):

    p(w | h) = max(c(h, w) - D, 0) / c(h) + gamma(h) * p(w | h'),   gamma(h) = D * N1+(h .) / c(h)

where h' drops the oldest word of h. Unigrams are interpolated with a uniform distribution over
the vocabulary plus <unk>. In ARPA form a listed n-gram carries its interpolated probability
and each history carries gamma(h) as its back-off weight, so a back-off reader (KenLM) computes
exactly the model above.

With --min-count C, n-grams (n >= 2) seen fewer than C times are not listed (pruning keeps a large
corpus's model small). A reader then backs off for them, and each history's back-off weight is
recomputed so that p(. | h) still sums to one:
gamma'(h) = (1 - sum of listed p(w | h)) / (1 - sum over the same w of p(w | h')).

    python -m asr.training.lm --out lm.arpa [--min-count 2] TEXT_OR_MANIFEST [...]   (text: one sentence a line)
"""
from __future__ import annotations

import math
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterable

from asr import cli
from asr.corpus.manifest import ManifestError, read_manifest
from asr.text.normalize import normalize

BOS, EOS, UNK = "<s>", "</s>", "<unk>"


def count_ngrams(sentences: Iterable[str], order: int) -> list[Counter]:
    """counts[n][ngram tuple] for n = 1..order over '<s> w1 .. wk </s>' (counts[0] unused)."""
    counts = [Counter() for _ in range(order + 1)]
    for sentence in sentences:
        words = [BOS, *sentence.split(), EOS]
        for n in range(1, order + 1):
            for i in range(len(words) - n + 1):
                counts[n][tuple(words[i:i + n])] += 1
    counts[1].pop((BOS,), None)  # <s> is never predicted
    return counts


def discount(counts: Counter) -> float:
    n1 = sum(1 for c in counts.values() if c == 1)
    n2 = sum(1 for c in counts.values() if c == 2)
    return min(max(n1 / (n1 + 2 * n2), 0.1), 0.9) if n1 + n2 else 0.5


def build_arpa(sentences: Iterable[str], order: int = 3, min_count: int = 1) -> str:
    """ARPA text of an `order`-gram model of normalised `sentences`, listing only the n-grams (n >= 2)
    seen at least `min_count` times."""
    counts = count_ngrams(sentences, order)
    vocab = sorted(w for (w,) in counts[1])
    total = sum(counts[1].values())
    d1 = discount(counts[1])
    uniform = d1 * len(vocab) / total / (len(vocab) + 1)
    probs: list[dict[tuple, float]] = [{} for _ in range(order + 1)]
    probs[1] = {(w,): (counts[1][(w,)] - d1) / total + uniform for w in vocab}
    probs[1][(UNK,)] = uniform
    backoffs: dict[tuple, float] = {}
    for n in range(2, order + 1):
        d = discount(counts[n])
        history_count: Counter = Counter()
        followers: defaultdict[tuple, int] = defaultdict(int)
        for gram, c in counts[n].items():
            history_count[gram[:-1]] += c
            followers[gram[:-1]] += 1
        for history, c in history_count.items():
            backoffs[history] = d * followers[history] / c
        for gram, c in counts[n].items():
            lower = lower_prob(gram[1:], probs, backoffs)
            probs[n][gram] = (c - d) / history_count[gram[:-1]] + backoffs[gram[:-1]] * lower
        if min_count > 1:
            prune(counts[n], probs, backoffs, min_count)
    return arpa_text(probs, backoffs, order)


def arpa_text(probs: list[dict[tuple, float]], backoffs: dict[tuple, float], order: int) -> str:
    """An `order`-gram back-off model as ARPA text: probs[n][gram] and backoffs[history] are linear (not log),
    probs[1] holds every word and <unk> but not <s> (written first, impossible, with its back-off weight)."""
    lines = ["\\data\\"] + [f"ngram {n}={len(probs[n]) + (n == 1)}" for n in range(1, order + 1)] + [""]
    for n in range(1, order + 1):
        lines.append(f"\\{n}-grams:")
        entries = sorted(probs[n].items())
        if n == 1:
            entries = [((BOS,), 0.0)] + entries
        for gram, p in entries:
            logp = -99.0 if p <= 0 else math.log10(p)
            line = f"{logp:.6f}\t{' '.join(gram)}"
            if n < order and gram in backoffs:
                line += f"\t{math.log10(backoffs[gram]) if backoffs[gram] > 0 else -99.0:.6f}"
            lines.append(line)
        lines.append("")
    lines.append("\\end\\")
    return "\n".join(lines) + "\n"


def prune(counts: Counter, probs: list[dict[tuple, float]], backoffs: dict[tuple, float], min_count: int) -> None:
    """Unlist the n-grams of `counts` (one order n) seen fewer than `min_count` times and renormalise
    the back-off weights of their histories, in place."""
    n = len(next(iter(counts)))
    for gram, c in counts.items():
        if c < min_count:
            del probs[n][gram]
    renormalise(probs[n], {gram[:-1] for gram in counts}, probs, backoffs)


def renormalise(grams: Iterable[tuple], histories: Iterable[tuple], probs: list[dict[tuple, float]],
                backoffs: dict[tuple, float]) -> None:
    """Set the back-off weight of every one of `histories` (all of one length) so that p(. | h) sums to one
    given its listed continuations among `grams`, in place:
    gamma(h) = (1 - sum of listed p(w | h)) / (1 - sum over the same w of p(w | h')).
    The lower orders' probabilities and weights must be final."""
    listed_mass: defaultdict[tuple, float] = defaultdict(float)  # sum of listed p(w | h)
    lower_mass: defaultdict[tuple, float] = defaultdict(float)  # sum of p(w | h') over the same w
    for gram in grams:
        listed_mass[gram[:-1]] += probs[len(gram)][gram]
        lower_mass[gram[:-1]] += lower_prob(gram[1:], probs, backoffs)
    for history in histories:
        backoffs[history] = max(1 - listed_mass[history], 0.0) / max(1 - lower_mass[history], 1e-12)


def lower_prob(gram: tuple, probs: list[dict[tuple, float]], backoffs: dict[tuple, float]) -> float:
    """p(gram[-1] | gram[:-1]) under the lower orders already estimated (back off through unseen n-grams)."""
    if gram in probs[len(gram)]:
        return probs[len(gram)][gram]
    if len(gram) == 1:
        return probs[1][(UNK,)]
    return backoffs.get(gram[:-1], 1.0) * lower_prob(gram[1:], probs, backoffs)


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
    args.out.write_text(build_arpa(sentences, args.order, args.min_count), encoding="utf-8")
    print(f"{args.out}: {args.order}-gram model of {len(sentences)} sentences", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
