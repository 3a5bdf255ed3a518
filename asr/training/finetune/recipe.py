"""The small-data fine-tuning recipe of `python -m asr.finetune`, as a training config (`asr.training.train`).

A low learning rate with a short warm-up and a cosine decay over the planned steps; the front end frozen
(and the lower blocks, if asked); light augmentation (speed, noise, SpecAugment); the user's recordings
repeated for as many passes as fit the time budget, beside a replayed share of the original mixture; no
validation (the held-out split is for the before / after score only, never for choosing).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from omegaconf import OmegaConf

from asr.model.config import EncoderConfig
from asr.training.config import TrainConfig
from asr.training.data import AugmentConfig, BucketBatchSampler
from asr.training.finetune import LR, REPLAY_SHARE


@dataclass
class Recipe:
    """The small-data recipe; the defaults are what `python -m asr.finetune` uses unless told otherwise."""

    lr: float = LR
    train_blocks: int | None = None  # the top N blocks train (None: all); the front end never does
    replay_share: float = REPLAY_SHARE
    max_passes: int = 20  # over the user's recordings, at the most, however long the budget
    batch_seconds: float = 40.0  # audio per step (as the shipped model's training)
    warmup_steps: int = 50
    final_ratio: float = 0.1  # the learning rate at the end, as a share of `lr`
    audio_per_second: dict[str, float] = field(default_factory=lambda: {"cpu": 30.0, "cuda": 600.0})
    # seconds of audio a second of training gets through, for the plan only: on the CPU about what the shipped
    # model's own training did on 2 cores (period 1 of recipes/voices: 2921 steps of 40 s in an hour, 2026-11-25);
    # on a GPU a guess, not measured here. A slower machine is stopped by the time budget, a faster one is done early.
    augment: AugmentConfig = field(default_factory=lambda: AugmentConfig(
        speeds=[0.95, 1.0, 1.05], noise_prob=0.2, snr_db=[10.0, 35.0], time_masks=2, time_mask_frames=40,
        freq_masks=2, freq_mask_bins=15))


@dataclass
class Plan:
    passes: int  # over the user's training recordings
    replay_seconds: float
    total_seconds: float  # the audio of the whole run (one epoch)


def plan(recipe: Recipe, train_seconds: float, replay: bool, minutes_budget: float, device: str) -> Plan:
    """How many passes over the recordings fit the time budget (1 to recipe.max_passes), and the replay's share."""
    ratio = recipe.replay_share / (1 - recipe.replay_share) if replay and recipe.replay_share > 0 else 0.0
    budget = recipe.audio_per_second["cuda" if device.startswith("cuda") else "cpu"] * minutes_budget * 60
    passes = max(1, min(recipe.max_passes, math.floor(budget / (train_seconds * (1 + ratio)))))
    replay_seconds = ratio * passes * train_seconds
    return Plan(passes, replay_seconds, passes * train_seconds + replay_seconds)


def frozen(cfg: EncoderConfig, train_blocks: int | None) -> list[str]:
    """Parameter-name prefixes that do not train: the front end, and the blocks under the top `train_blocks`."""
    kept = cfg.n_layers if train_blocks is None else max(0, min(train_blocks, cfg.n_layers))
    return ["subsampling."] + [f"blocks.{i}." for i in range(cfg.n_layers - kept)]


def count_steps(durations: list[float], batch_seconds: float) -> int:
    """The optimizer steps of one epoch over utterances of these durations (the training loader's batches)."""
    return len(BucketBatchSampler(durations, batch_seconds, shuffle=True, rank=0, world_size=1))


def train_config(recipe: Recipe, start: str | Path, start_cfg: EncoderConfig, run_dir: Path, train: Path,
                 passes: int, replay: Path | None, steps: int, device: str, threads: int, workers: int,
                 seed: int = 0):
    """The training config (an OmegaConf TrainConfig, as `python -m asr.training` composes one) of a fine-tune
    of the model at `start` on the manifest `train` (`passes` times) and `replay`, over `steps` steps."""
    sources = [{"manifest": str(train), "repeat": passes}] + ([{"manifest": str(replay)}] if replay else [])
    gpu, index = device.startswith("cuda"), device.partition(":")[2]
    overrides = {
        "model": asdict(start_cfg), "run_dir": str(run_dir), "init_from": str(start), "seed": seed,
        "threads": threads, "freeze": frozen(start_cfg, recipe.train_blocks), "select_by": "train_loss",
        "checkpoint_every_steps": 50, "keep_checkpoints": 0,
        "data": {"train": sources, "valid": [], "max_batch_seconds": recipe.batch_seconds, "num_workers": workers,
                 "features": start_cfg.features, "augment": asdict(recipe.augment)},
        "optim": {"lr": recipe.lr, "warmup_steps": min(recipe.warmup_steps, max(steps // 10, 1)),
                  "decay_steps": steps, "final_ratio": recipe.final_ratio},
        "trainer": {"accelerator": "gpu" if gpu else "cpu", "devices": f"{index}," if index else "1",  # "N,": GPU N
                    "precision": "bf16-mixed" if gpu else "32-true", "max_epochs": 1,
                    "max_steps": steps, "limit_val_batches": 0, "enable_progress_bar": False,
                    "check_val_every_n_epoch": None, "log_every_n_steps": 10},
    }
    return OmegaConf.merge(OmegaConf.structured(TrainConfig), overrides)
