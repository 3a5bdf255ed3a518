"""Average finished model files weight by weight (a uniform "model soup"):

    python scripts/average_models.py A.safetensors B.safetensors [...] --out SOUP.safetensors [--weights 1 1 ...]
        [--first-norm]

Meant for fine-tunes of one ancestor (the default model averages stage 3 and stage 4, both grown
from stage 2): their weights stay close enough that the mean is a better model than either, while
the mean of unrelated models is noise. The files must share architecture (dropout aside; the first file's is kept), tokenizer and CMVN
statistics (the statistics are buffers, so they would be averaged too; they must already be equal). --weights counts
each file that many times (default: once each). --first-norm averages files that normalise their frames differently
(a fine-tune switched to the running mean, `init_norm=running`, with the model it started from): the soup normalises
as the first file does.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from asr.model.errors import ModelError  # noqa: E402
from asr.model.loader import average_models  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--weights", type=float, nargs="+", help="how many times each file counts (default: once)")
    parser.add_argument("--first-norm", action="store_true",
                        help="the files may normalise frames differently: the soup does as the first file does")
    args = parser.parse_args()
    if len(args.models) < 2:
        parser.error("give at least two model files")
    try:
        average_models(args.models, args.out, args.weights, args.first_norm)
    except ModelError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
