"""What the command-line tools share: loading the model, and the --chunk-ms option."""
from __future__ import annotations

import argparse
import sys

from asr.audio import SAMPLE_RATE
from asr.model_io import default_model_path
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
