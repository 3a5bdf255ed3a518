"""Small builders shared by the tests."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from omegaconf import OmegaConf

from asr.model.encoder import Encoder, EncoderConfig

# Small tensors run fastest on one thread, and the suite must not fight other processes for cores.
torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"
DATA = ROOT.parent / "shared" / "data"  # ../shared/data beside the checkout
SPEECHOCEAN = DATA / "speechocean762" / "train.jsonl"
PRESETS = sorted(p.stem for p in (CONF / "attention").glob("*.yaml"))


def preset(name: str) -> dict:
    """window and n_heads of an attention preset in conf/attention."""
    return dict(OmegaConf.load(CONF / "attention" / f"{name}.yaml"))


def tiny_encoder(seed: int = 0, **overrides) -> Encoder:
    """A small random encoder in eval mode (dropout off) for exactness tests."""
    torch.manual_seed(seed)
    cfg = dict(vocab_size=16, d_model=32, n_layers=2, n_heads=4, window=8, dropout=0.0,
               subsampling=1, subsampling_kernel=1)
    cfg.update(overrides)
    model = Encoder(EncoderConfig(**cfg)).eval()
    with torch.no_grad():  # make the position bias non-trivial, as after training
        for block in model.blocks:
            block.attn.distance_bias.normal_(0, 1)
    return model


def small_manifest(tmp_path: Path, count: int) -> Path:
    """The `count` shortest adult speechocean762 training utterances, with absolute audio paths."""
    rows = [json.loads(line) for line in SPEECHOCEAN.read_text().splitlines()]
    rows = sorted((r for r in rows if r["age"] >= 18 and r["duration"] >= 1.5), key=lambda r: r["duration"])[:count]
    for row in rows:
        row["audio"] = str(SPEECHOCEAN.parent / row["audio"])
    path = tmp_path / "small.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
