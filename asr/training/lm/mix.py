"""Linear interpolation of two back-off word n-gram models (ARPA), written as one back-off model.

    p(w | h) = weight * p_a(w | h) + (1 - weight) * p_b(w | h)

over the union of the two vocabularies: a word that one model does not know has probability 0 there
(each model is a distribution over its own words and <unk>, so the mixture is one over their union
and <unk>). Every n-gram listed in either model is listed in the mixture with exactly that probability
(each side computed with its own back-offs); every listed history gets the back-off weight that makes
p(. | h) sum to one again (`asr.training.lm.ngram`, where the arithmetic lives), so a reader that backs off (KenLM)
sees a proper distribution for every history. This is how SRILM's `ngram -mix-lm` writes a static mixture.

    python -m asr.training.lm.mix A.arpa B.arpa --weight 0.3 --out mixed.arpa   (weight: A's share)
"""
from __future__ import annotations

import sys
from pathlib import Path

from asr import cli
from asr.training.lm.ngram import ArpaError, BackoffModel, interpolate, read_arpa, write_arpa

__all__ = ["ArpaError", "BackoffModel", "interpolate", "mix_arpa", "read_arpa", "write_arpa"]


def mix_arpa(a: str | Path, b: str | Path, weight: float, out: str | Path) -> BackoffModel:
    """Write the mixture of the ARPA files `a` (share `weight`) and `b` to `out`; returns it."""
    mixed = interpolate(read_arpa(a), read_arpa(b), weight)
    write_arpa(mixed, out)
    return mixed


def main(argv: list[str] | None = None) -> int:
    parser = cli.new_parser("asr.training.lm.mix", __doc__.split("\n\n")[0])
    parser.add_argument("a", type=Path,
                        help="the first ARPA model (e.g. one of your own text: python -m asr.training.lm)")
    parser.add_argument("b", type=Path, help="the second (e.g. asr/pretrained/default.arpa.gz)")
    parser.add_argument("--weight", type=cli.finite_float, default=0.5, help="the first model's share, 0-1 (default 0.5)")
    parser.add_argument("--out", type=Path, required=True, help="the ARPA file to write")
    args = parser.parse_args(argv)
    try:
        mixed = mix_arpa(args.a, args.b, args.weight, args.out)
    except (ArpaError, ValueError, OSError) as err:
        print(f"asr.training.lm.mix: error: {err}", file=sys.stderr)
        return 1
    sizes = ", ".join(f"{size} {n}-grams" for n, size in enumerate(mixed.sizes(), start=1))
    print(f"{args.out}: {sizes}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
