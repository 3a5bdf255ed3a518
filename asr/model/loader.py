"""The one model loader: a single safetensors file holds weights, config, tokenizer and CMVN stats.

No pickles anywhere: a file that is not ours is refused with a clear message.
"""
from __future__ import annotations

import base64
import json
from dataclasses import asdict
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, safe_open, save_file

from asr.model.encoder import Encoder, EncoderConfig
from asr.model.errors import ModelError
from asr.model.folder import WEIGHTS, model_folder
from asr.pretrained import default_model_path
from asr.text.tokenizer import Tokenizer

FORMAT = "asr-ctc-v1"


def save_model(path: str | Path, encoder: Encoder, tokenizer: Tokenizer, info: dict | None = None,
               half: bool = False) -> None:
    """Write the model file; `half` stores the weights as float16 (the CMVN stats stay float32), half the
    bytes: loading casts them back to the model's float32."""
    metadata = {"format": FORMAT, "config": json.dumps(asdict(encoder.cfg)),
                "tokenizer": base64.b64encode(tokenizer.to_bytes()).decode(), "info": json.dumps(info or {})}
    tensors = {k: v.detach().contiguous().cpu() for k, v in encoder.state_dict().items()}
    if half:
        tensors = {k: v.half() if v.is_floating_point() and not k.startswith("cmvn.") else v for k, v in tensors.items()}
    save_file(tensors, str(path), metadata=metadata)


def average_weights(states: list[dict[str, torch.Tensor]],
                    weights: list[float] | None = None) -> dict[str, torch.Tensor]:
    """Weight-by-weight mean of state dicts with the same keys (summed in float64, first one's dtypes), each state
    counted by its `weights` (default: equally)."""
    weights = weights or [1.0] * len(states)
    total = sum(weights)
    return {k: (sum(w * s[k].double() for w, s in zip(weights, states)) / total).to(v.dtype)
            for k, v in states[0].items()}


NORMALISATION = ("norm", "norm_prior", "norm_horizon")  # how a model normalises its frames (asr.model.normalise)


def average_models(paths: list[Path], out: Path, weights: list[float] | None = None,
                   first_norm: bool = False) -> None:
    """Write the weight-by-weight mean of the model files `paths` to `out` (a "model soup" of fine-tunes of one
    ancestor), each counted by its `weights` (default: uniform). ModelError unless they share architecture (dropout
    aside; the first file's is kept), tokenizer and CMVN statistics (buffers, so they would be averaged too).
    `first_norm`: the files may normalise their frames differently (`EncoderConfig.norm`: a fine-tune that switched
    to the running mean, averaged with its ancestor), and the soup normalises as the first one does."""
    if weights is not None and (len(weights) != len(paths) or min(weights) < 0 or sum(weights) <= 0):
        raise ModelError(f"{len(weights)} weights for {len(paths)} models: give one each, >= 0, not all 0")
    weights = weights or [1.0] * len(paths)
    left_out = ("dropout", *(NORMALISATION if first_norm else ()))

    def architecture(cfg: EncoderConfig) -> dict:
        return {k: v for k, v in asdict(cfg).items() if k not in left_out}

    models = [load_model(p) for p in paths]
    (first, tokenizer, _), rest = models[0], models[1:]
    for path, (encoder, other_tokenizer, _) in zip(paths[1:], rest):
        if architecture(encoder.cfg) != architecture(first.cfg) or other_tokenizer.to_bytes() != tokenizer.to_bytes():
            raise ModelError(f"{path}: architecture or tokenizer differs from {paths[0]}")
        for name in ("cmvn.mean", "cmvn.std"):
            if not torch.equal(encoder.state_dict()[name], first.state_dict()[name]):
                raise ModelError(f"{path}: CMVN statistics differ from {paths[0]}")
    first.load_state_dict(average_weights([encoder.state_dict() for encoder, _, _ in models], weights))
    averaged = [{"file": Path(p).name, "weight": w, **info} for p, w, (_, _, info) in zip(paths, weights, models)]
    save_model(out, first, tokenizer, {"averaged_models": averaged})


def _checked_path(path: str | Path | None) -> Path:
    """`path` (a model folder: its weights), or the bundled model for None; ModelError when there is no such file."""
    if path is None:
        path = default_model_path()
        if path is None:
            raise ModelError("no bundled default model in this installation; pass --model PATH")
    path = Path(path)
    if (folder := model_folder(path)) is not None:  # a model folder: its weights (asr.model.folder)
        if folder.weights is None:
            raise ModelError(f"{path}: this model folder has no {WEIGHTS} (only its ONNX export: use the onnx backend)")
        return folder.weights
    if not path.is_file():
        raise ModelError(f"{path}: no such model file")
    return path


def _invalid(path: Path, err: Exception) -> ModelError:
    reason = str(err).splitlines()[0] if str(err) else type(err).__name__
    return ModelError(f"{path}: not a valid asr model file ({reason})")


_READ_ERRORS = (SafetensorError, OSError, ValueError, KeyError, RuntimeError, TypeError)


def _read_header(path: Path) -> tuple[EncoderConfig, dict[str, str]]:
    """The model's config and raw metadata, read from the file's header only (no weights)."""
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
        if metadata.get("format") != FORMAT:
            raise ModelError(f"{path}: not an asr model (format {metadata.get('format')!r}, expected {FORMAT!r})")
        return EncoderConfig(**json.loads(metadata["config"])), metadata
    except ModelError:
        raise
    except _READ_ERRORS as err:
        raise _invalid(path, err) from None


def load_config(path: str | Path | None = None) -> EncoderConfig:
    """The architecture of the model at `path` (None: the bundled one) without loading its weights."""
    return _read_header(_checked_path(path))[0]


def load_model(path: str | Path | None = None) -> tuple[Encoder, Tokenizer, dict]:
    """Load (encoder in eval mode, tokenizer, info). path=None: the bundled default model."""
    path = _checked_path(path)
    cfg, metadata = _read_header(path)
    try:
        tokenizer = Tokenizer.from_bytes(base64.b64decode(metadata["tokenizer"]))
        encoder = Encoder(cfg)
        encoder.load_state_dict(load_file(str(path)))
    except _READ_ERRORS as err:
        raise _invalid(path, err) from None
    return encoder.eval(), tokenizer, json.loads(metadata.get("info", "{}"))


def random_model(cfg: EncoderConfig | None = None, seed: int = 0) -> tuple[Encoder, Tokenizer, dict]:
    """An untrained model from the default config (for demos before a model exists)."""
    torch.manual_seed(seed)
    tokenizer = Tokenizer("char")
    cfg = cfg or EncoderConfig()
    cfg.vocab_size = tokenizer.vocab_size
    return Encoder(cfg).eval(), tokenizer, {"untrained": True}
