"""What the command-line tools share: loading the model, the --chunk-ms option and the LM options."""
from __future__ import annotations

import argparse
import sys

from asr.audio import SAMPLE_RATE
from asr.decoding.beam import BeamConfig, BeamSearch
from asr.model.loader import default_lm_path, default_model_path
from asr.recognizer import Recognizer


def _positive_ms(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0 (got {text})")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1 (got {text})")
    return value


def add_manifest_args(parser: argparse.ArgumentParser) -> None:
    """Add --manifest (required), --model, --split and --limit: the options of tools that score a manifest."""
    parser.add_argument("--manifest", required=True, help="JSON Lines manifest with audio and text")
    parser.add_argument("--model", help="model file (.safetensors); default: the bundled model")
    parser.add_argument("--split", default="", help="only the manifest rows of this split (e.g. test for FSDD)")
    parser.add_argument("--limit", type=_positive_int, help="only the first N utterances")


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


def add_lm_args(parser: argparse.ArgumentParser, finals: bool = False) -> None:
    """Add --beam / --lm (lexicon beam search with a word LM instead of greedy decoding) and its weights.

    finals=True (stream, transcribe): the beam decodes each finished segment while partial results
    stay greedy, and it is on by default with the bundled model and LM (--greedy turns it off)."""
    defaults = BeamConfig()
    what = "segment finals from a beam search with" if finals else "beam search with"
    parser.add_argument("--beam", action="store_true", help=f"{what} the bundled word LM"
                        + (" (the default with the bundled model)" if finals else ""))
    parser.add_argument("--lm", help=f"{what} this ARPA word LM (python -m asr.tools.lm) instead")
    if finals:
        parser.add_argument("--greedy", action="store_true", help="greedy CTC finals, no word LM")
    parser.add_argument("--beam-size", type=int, default=defaults.beam_size, help="beam width (with the LM)")
    parser.add_argument("--lm-weight", type=float, default=defaults.lm_weight, help="LM weight (with the LM)")
    parser.add_argument("--word-score", type=float, default=defaults.word_score, help="score per word (with the LM)")


def load_beam(args: argparse.Namespace, recognizer: Recognizer) -> BeamSearch | None:
    """The beam search the options ask for, or None for greedy decoding. Tools with --greedy
    (add_lm_args(finals=True)) use the bundled LM by default when they run the bundled model."""
    if getattr(args, "greedy", False):
        return None
    by_default = hasattr(args, "greedy") and args.model is None and default_model_path() is not None
    lm = args.lm
    if lm is None and (args.beam or by_default):
        lm = default_lm_path()
    if args.beam and lm is None:
        raise FileNotFoundError("--beam: no word LM is bundled; give one with --lm PATH")
    return BeamSearch(recognizer.tokenizer, lm, BeamConfig(args.beam_size, args.lm_weight, args.word_score)) if lm else None
