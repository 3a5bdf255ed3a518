"""What the command-line tools share: loading the model, the --chunk-ms option and the LM options."""
from __future__ import annotations

import argparse
import sys

from asr.audio import SAMPLE_RATE
from asr.beam import BeamConfig, BeamSearch
from asr.model_io import default_lm_path, default_model_path
from asr.recognizer import Recognizer


def _positive_ms(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0 (got {text})")
    return value


def add_chunk_ms(parser: argparse.ArgumentParser, default: float, help: str) -> None:
    """Add --chunk-ms (milliseconds of audio per recognizer step, > 0)."""
    parser.add_argument("--chunk-ms", type=_positive_ms, default=default, help=help)


def chunk_samples(chunk_ms: float) -> int:
    """16 kHz samples in `chunk_ms` milliseconds (at least one)."""
    return max(1, round(chunk_ms * SAMPLE_RATE / 1000))


def load_recognizer(tool: str, model: str | None) -> Recognizer:
    """The model at `model`, else the bundled one, else (with a warning) an untrained one."""
    if model is None and default_model_path() is None:
        print(f"asr.{tool}: no bundled model yet; using a randomly initialised model from the default config",
              file=sys.stderr)
    return Recognizer.load(model, allow_random=True)


def add_lm_args(parser: argparse.ArgumentParser) -> None:
    """Add --beam / --lm (lexicon beam search with a word LM instead of greedy decoding) and its weights."""
    defaults = BeamConfig()
    parser.add_argument("--beam", action="store_true", help="beam search with the bundled word LM")
    parser.add_argument("--lm", help="beam search with this ARPA word LM (python -m asr.lm) instead")
    parser.add_argument("--beam-size", type=int, default=defaults.beam_size, help="beam width (with --beam or --lm)")
    parser.add_argument("--lm-weight", type=float, default=defaults.lm_weight, help="LM weight (with --beam or --lm)")
    parser.add_argument("--word-score", type=float, default=defaults.word_score, help="score per word (with --beam or --lm)")


def load_beam(args: argparse.Namespace, recognizer: Recognizer) -> BeamSearch | None:
    """The beam search the --lm options ask for (None: greedy decoding)."""
    if not (args.beam or args.lm):
        return None
    lm = args.lm or default_lm_path()
    if lm is None:
        raise FileNotFoundError("--beam: no word LM is bundled; give one with --lm PATH")
    return BeamSearch(recognizer.tokenizer, lm, BeamConfig(args.beam_size, args.lm_weight, args.word_score))
