"""Put another pronunciation lexicon into a phone model's file (its weights untouched):

    python scripts/set_lexicon.py MODEL.safetensors LEXICON.txt --out NEW.safetensors [--half]

A phone model carries the lexicon it was trained with, and its searches spell words through it. The lexicon is
not learned, so a newer build (`python -m asr.training.g2p.lexicon`: more words, or its words in another order) can
replace it; the model's phones are the lexicon's (the 39 of `asr.text.lexicon.PHONES`, always). Weights keep
their stored precision, or become float16 with --half (as the shipped model stores them).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from safetensors import safe_open  # noqa: E402

from asr.model.errors import ModelError  # noqa: E402
from asr.model.loader import load_model, save_model  # noqa: E402
from asr.text.g2p import bundled_g2p  # noqa: E402
from asr.text.lexicon import Lexicon, LexiconError  # noqa: E402


def stored_half(path: Path) -> bool:
    """Whether the file stores its weights (CMVN statistics aside) as float16."""
    with safe_open(str(path), "pt") as f:
        name = next(n for n in f.keys() if not n.startswith("cmvn."))
        return str(f.get_slice(name).get_dtype()) == "F16"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", type=Path)
    parser.add_argument("lexicon", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--half", action="store_true", help="store the weights as float16")
    args = parser.parse_args()
    try:
        encoder, tokenizer, info = load_model(args.model)
        if tokenizer.kind != "phone":
            raise ModelError(f"{args.model}: a {tokenizer.kind} model spells words itself, it has no lexicon")
        tokenizer.with_lexicon(Lexicon.load(args.lexicon, g2p=bundled_g2p()))
    except (ModelError, LexiconError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    save_model(args.out, encoder, tokenizer, info, half=args.half or stored_half(args.model))
    print(f"{args.out}: {len(tokenizer.lexicon)} words from {args.lexicon}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
