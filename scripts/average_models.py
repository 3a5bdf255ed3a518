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
from dataclasses import asdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from asr.model.config import EncoderConfig  # noqa: E402
from asr.model.loader import average_weights, load_model, save_model  # noqa: E402
from asr.model.backend import ModelError  # noqa: E402


def architecture(cfg: EncoderConfig) -> dict:
    """The config without dropout, which only matters in training."""
    return {k: v for k, v in asdict(cfg).items() if k != "dropout"}


def average_models(paths: list[Path], out: Path) -> None:
    """Write the weight-by-weight mean of the model files `paths` to `out` (ModelError if they differ)."""
    models = [load_model(p) for p in paths]
    (first, tokenizer, _), rest = models[0], models[1:]
    for path, (encoder, other_tokenizer, _) in zip(paths[1:], rest):
        if architecture(encoder.cfg) != architecture(first.cfg) or other_tokenizer.to_bytes() != tokenizer.to_bytes():
            raise ModelError(f"{path}: architecture or tokenizer differs from {paths[0]}")
        for name in ("cmvn.mean", "cmvn.std"):
            if not torch.equal(encoder.state_dict()[name], first.state_dict()[name]):
                raise ModelError(f"{path}: CMVN statistics differ from {paths[0]}")
    first.load_state_dict(average_weights([encoder.state_dict() for encoder, _, _ in models]))
    save_model(out, first, tokenizer, {"averaged_models": [{"file": p.name, **info} for p, (_, _, info)
                                                           in zip(paths, models)]})


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
