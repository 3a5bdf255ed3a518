"""Linear interpolation of two back-off word n-gram models (ARPA), written as one back-off model.

    p(w | h) = weight * p_a(w | h) + (1 - weight) * p_b(w | h)

over the union of the two vocabularies: a word that one model does not know has probability 0 there
(each model is a distribution over its own words and <unk>, so the mixture is one over their union
and <unk>). Every n-gram listed in either model is listed in the mixture with exactly that probability
(each side computed with its own back-offs); every listed history gets the back-off weight that makes
p(. | h) sum to one again (`asr.training.lm.renormalise`), so a reader that backs off (KenLM) sees a
proper distribution for every history. This is how SRILM's `ngram -mix-lm` writes a static mixture.

    python -m asr.training.lm_mix A.arpa B.arpa --weight 0.3 --out mixed.arpa   (weight: A's share)
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from asr import cli
from asr.training.lm import BOS, UNK, arpa_text, lower_prob, renormalise


class ArpaError(ValueError):
    """An ARPA file that cannot be read; the message names the file, the line and the reason."""


@dataclass
class BackoffModel:
    """An n-gram back-off model: probs[n][gram] and backoffs[history], linear (not log); probs[1] holds
    every word and <unk>, not <s> (which is never predicted)."""

    order: int
    probs: list[dict[tuple, float]]
    backoffs: dict[tuple, float]

    @property
    def vocabulary(self) -> set[str]:
        """The words it predicts: every unigram (</s> and <unk> among them), not <s>."""
        return {gram[0] for gram in self.probs[1]}

    def prob(self, word: str, history: tuple = ()) -> float:
        """p(word | history) as a back-off reader computes it; 0 for a word outside the vocabulary
        (<unk> is a word of its own here, not a stand-in for the others)."""
        if (word,) not in self.probs[1]:
            return 0.0
        return lower_prob((*history[max(len(history) - self.order + 1, 0):], word), self.probs, self.backoffs)


def read_arpa(path: str | Path) -> BackoffModel:
    """The model in an ARPA file; ArpaError for one that is not ARPA."""
    path = Path(path)
    probs: list[dict[tuple, float]] = [{}]
    backoffs: dict[tuple, float] = {}
    order = 0
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise ArpaError(f"{path}: cannot read it as an ARPA file ({getattr(err, 'strerror', None) or err})") from None
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line or line.startswith("ngram ") or line in ("\\data\\", "\\end\\"):
            continue
        if line.startswith("\\") and line.endswith("-grams:"):
            order = int(line[1:].split("-")[0])
            probs.append({})
            continue
        fields = line.split()
        if order == 0 or len(fields) not in (order + 1, order + 2):
            raise ArpaError(f"{path}:{number}: not an ARPA n-gram line of order {order}")
        try:
            logp, gram = float(fields[0]), tuple(fields[1:order + 1])
            if len(fields) == order + 2:
                backoffs[gram] = 10 ** float(fields[-1])
        except ValueError:
            raise ArpaError(f"{path}:{number}: malformed number") from None
        if gram != (BOS,):
            probs[order][gram] = 10 ** logp
    if order == 0 or (UNK,) not in probs[1]:
        raise ArpaError(f"{path}: not an ARPA model with <unk> (no unigrams, or no <unk> among them)")
    return BackoffModel(order, probs, backoffs)


def interpolate(a: BackoffModel, b: BackoffModel, weight: float) -> BackoffModel:
    """The mixture weight * a + (1 - weight) * b as a back-off model (see the module doc)."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"the interpolation weight must be in [0, 1] (got {weight})")
    order = max(a.order, b.order)
    probs: list[dict[tuple, float]] = [{} for _ in range(order + 1)]
    for n in range(1, order + 1):
        grams = set(a.probs[n] if n <= a.order else ()) | set(b.probs[n] if n <= b.order else ())
        probs[n] = {gram: weight * a.prob(gram[-1], gram[:-1]) + (1 - weight) * b.prob(gram[-1], gram[:-1])
                    for gram in grams}
    backoffs: dict[tuple, float] = {}
    for n in range(1, order):  # histories of length n, shortest first: each needs the shorter ones final
        histories = [gram for gram in probs[n]] + ([(BOS,)] if n == 1 else [])
        renormalise(probs[n + 1], histories, probs, backoffs)
    return BackoffModel(order, probs, backoffs)


def write_arpa(model: BackoffModel, out: str | Path) -> None:
    """`model` as an ARPA file at `out`, written whole, then renamed into place."""
    out = Path(out)
    partial = out.with_name(f".{out.name}.partial")
    partial.write_text(arpa_text(model.probs, model.backoffs, model.order), encoding="utf-8")
    partial.replace(out)


def mix_arpa(a: str | Path, b: str | Path, weight: float, out: str | Path) -> BackoffModel:
    """Write the mixture of the ARPA files `a` (share `weight`) and `b` to `out`; returns it."""
    mixed = interpolate(read_arpa(a), read_arpa(b), weight)
    write_arpa(mixed, out)
    return mixed


def main(argv: list[str] | None = None) -> int:
    parser = cli.new_parser("asr.training.lm_mix", __doc__.split("\n\n")[0])
    parser.add_argument("a", type=Path,
                        help="the first ARPA model (e.g. one of your own text: python -m asr.training.lm)")
    parser.add_argument("b", type=Path, help="the second (e.g. asr/pretrained/default.arpa)")
    parser.add_argument("--weight", type=cli.finite_float, default=0.5, help="the first model's share, 0-1 (default 0.5)")
    parser.add_argument("--out", type=Path, required=True, help="the ARPA file to write")
    args = parser.parse_args(argv)
    try:
        mixed = mix_arpa(args.a, args.b, args.weight, args.out)
    except (ArpaError, ValueError, OSError) as err:
        print(f"asr.training.lm_mix: error: {err}", file=sys.stderr)
        return 1
    sizes = ", ".join(f"{len(mixed.probs[n]) + (n == 1)} {n}-grams" for n in range(1, mixed.order + 1))
    print(f"{args.out}: {sizes}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
