"""Average finished model files weight by weight (a uniform "model soup"):

    python scripts/average_models.py A.safetensors B.safetensors [...] --out SOUP.safetensors

Meant for fine-tunes of one ancestor (the default model averages stage 3 and stage 4, both grown
from stage 2): their weights stay close enough that the mean is a better model than either, while
the mean of unrelated models is noise. The files must share architecture (dropout aside; the first file's is kept), tokenizer and CMVN
statistics (the statistics are buffers, so they would be averaged too; they must already be equal).
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
    args = parser.parse_args()
    if len(args.models) < 2:
        parser.error("give at least two model files")
    try:
        average_models(args.models, args.out)
    except ModelError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
