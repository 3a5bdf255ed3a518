"""Small builders shared by the tests."""
from __future__ import annotations

import json
import logging
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf

from asr.model.encoder import Encoder, EncoderConfig, EncoderState
from asr.text.tokenizer import Tokenizer

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


def stream_in_chunks(model: Encoder, feats: torch.Tensor, sizes: list[int]) -> tuple[torch.Tensor, EncoderState]:
    """`feats` (B, T, F) through `model.step` in pieces of `sizes` frames, then the rest as the stream's end
    (final=True: a lookahead model's last, partial chunk too); the log-probs (B, T', V) and the last state."""
    state, outs, start = model.initial_state(feats.shape[0]), [], 0
    for size in sizes:
        logprobs, state = model.step(feats[:, start:start + size], state)
        outs.append(logprobs)
        start += size
    logprobs, state = model.step(feats[:, start:], state, final=True)
    return torch.cat(outs + [logprobs], dim=1), state


def tiny_encoder(seed: int = 0, **overrides) -> Encoder:
    """A small random encoder in eval mode (dropout off) for exactness tests."""
    torch.manual_seed(seed)
    cfg = dict(vocab_size=16, d_model=48, n_layers=2, n_heads=4, window=8, dropout=0.0,
               subsampling=1, subsampling_kernel=1)
    cfg.update(overrides)
    model = Encoder(EncoderConfig(**cfg)).eval()
    with torch.no_grad():  # make the position bias non-trivial, as after training
        for block in model.blocks:
            block.attn.distance_bias.normal_(0, 1)
            if block.attn.ahead_bias is not None:
                block.attn.ahead_bias.normal_(0, 1)
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


def in_process(command: list[str], cwd=None, **_) -> subprocess.CompletedProcess:
    """Run `python -m MODULE ARGS` or `python SCRIPT ARGS` here, as its own process would from `cwd`: a
    stand-in for `subprocess.run` in asr.training.recipe, so that a recipe's steps import torch, Lightning
    and Hydra once rather than once per step."""
    assert command[0] == sys.executable, command
    module = command[2] if command[1] == "-m" else None
    saved_argv, root = sys.argv, logging.getLogger()
    saved_logging = root.handlers[:], root.level  # Hydra configures logging for each job it runs
    sys.argv = [module or command[1], *command[3 if module else 2:]]
    code = 0
    try:
        if module:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(str(ROOT / command[1]), run_name="__main__")
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        sys.argv = saved_argv
        for handler in set(root.handlers) - set(saved_logging[0]):
            handler.close()
        root.handlers[:], root.level = saved_logging
    return subprocess.CompletedProcess(command, code)


def emissions(tokenizer: Tokenizer, frames: list[dict[str, float]]) -> np.ndarray:
    """(T, V) log-probs: each frame gives its listed units these probabilities, the rest share what is left."""
    units = tokenizer.units()
    rows = []
    for frame in frames:
        row = np.full(len(units), (1 - sum(frame.values())) / (len(units) - len(frame)))
        for unit, p in frame.items():
            row[units.index(unit)] = p
        rows.append(np.log(row))
    return np.stack(rows).astype(np.float32)


def recipe_module(script: Path, name: str, monkeypatch, runner=None):
    """A recipe script loaded as a module whose commands run in this process (in_process): the
    `subprocess` of `runner` (the module that runs them; default the script itself) is replaced."""
    import importlib.util  # noqa: PLC0415
    from types import SimpleNamespace  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location(name, script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(runner or module, "subprocess", SimpleNamespace(run=in_process))
    monkeypatch.chdir(ROOT)
    return module
