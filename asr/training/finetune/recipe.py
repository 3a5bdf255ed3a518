"""The small-data fine-tuning recipe of `python -m asr.finetune`: its settings, and the plan of a run.

A low learning rate with a short warm-up and a cosine decay over the planned steps; the front end frozen
(and the lower blocks, if asked); light augmentation (speed, noise, SpecAugment); the user's recordings
repeated for as many passes as fit the time budget (`plan`); a guard against forgetting general speech
(`guard_of`): a replayed share of the original mixture where its corpora are found, else the starting model's
own posteriors on the same batches as a second target (`anchor_of`, asr/training/acoustic/anchor.py); no validation
(the held-out split is for the before / after score only, never for choosing).
`asr.training.finetune.run.train_config` makes it a training config. No torch, so the command line's
defaults come from here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from asr.model.config import EncoderConfig

LR = 1.5e-4  # the recipe's peak learning rate, and the replayed share of each epoch's audio from the original
REPLAY_SHARE = 0.75  # mixture (where it is found): at 3e-4 and 0.5 the fine-tunes of benchmarks/finetune/finetune.md
# (2026-12-02) lost 2.2-2.9 points of speechocean762 dev (beam, the bundled LM) to forgetting; at 1.5e-4 and 0.75
# about 1.1


CRITERIA = {  # the training config's `criterion` of each name, as conf/criterion/NAME.yaml has it
    "ctc": {"kind": "ctc"},
    "crf": {"kind": "crf", "order": 2, "ctc_weight": 0.1},  # a bigram phone LM of the run's transcripts
    "crf_trigram": {"kind": "crf", "order": 3, "ctc_weight": 0.1},  # a trigram: the bundled model's own
}
GUARDS = ("auto", "replay", "distill", "l2sp", "none")
GUARD_WEIGHTS = {"distill": 1.0, "l2sp": 1.0}  # the anchor's weight beside CTC (asr/training/acoustic/anchor.py)
GUARD_NAMES = {"replay": "replay of the original mixture", "distill": "distillation toward the starting model",
               "l2sp": "L2-SP (a pull toward the starting weights)", "none": "none"}


@dataclass
class Recipe:
    """The small-data recipe; the defaults are what `python -m asr.finetune` uses unless told otherwise."""

    lr: float = LR
    train_blocks: int | None = None  # the top N blocks train (None: all); the front end never does
    replay_share: float = REPLAY_SHARE
    guard: str = "auto"  # against forgetting: one of GUARDS (auto: replay where its corpora are found, else distill)
    criterion: str = "crf_trigram"  # one of CRITERIA: the bundled model's own loss, whose posteriors its tuned LM
    # weight expects; plain CTC moves them back toward a per-frame prior
    guard_weight: float | None = None  # the anchor's weight (None: GUARD_WEIGHTS)
    max_passes: int = 20  # over the user's recordings, at the most, however long the budget
    batch_seconds: float = 40.0  # audio per step (as the shipped model's training)
    warmup_steps: int = 50
    final_ratio: float = 0.1  # the learning rate at the end, as a share of `lr`
    audio_per_second: dict[str, float] = field(default_factory=lambda: {"cpu": 30.0, "cuda": 600.0})
    # seconds of audio a second of training gets through, for the plan only: on the CPU about what the shipped
    # model's own training did on 2 cores (period 1 of recipes/voices: 2921 steps of 40 s in an hour, 2026-11-25);
    # on a GPU a guess, not measured here. A slower machine is stopped by the time budget, a faster one is done early.
    augment: dict[str, Any] = field(default_factory=lambda: {  # AugmentConfig's fields (asr.training.acoustic.data; the
        "speeds": [0.95, 1.0, 1.05], "noise_prob": 0.2, "snr_db": [10.0, 35.0],  # rest keep its defaults)
        "time_masks": 2, "time_mask_frames": 40, "freq_masks": 2, "freq_mask_bins": 15})


@dataclass
class Plan:
    """What a run trains on: the recipe fitted to the recordings and the time budget (kept in DIR/run/plan.json)."""

    passes: int  # over the user's training recordings
    replay_seconds: float
    total_seconds: float  # the audio of the whole run (one epoch)


def guard_of(recipe: Recipe, replay_found: bool) -> str:
    """The guard a run uses: the one asked for, or (auto) replay where its corpora are found and wanted
    (replay_share > 0), else distillation. ValueError for replay asked for where none is found."""
    if recipe.guard not in GUARDS:
        raise ValueError(f"guard {recipe.guard!r}: one of {', '.join(GUARDS)}")
    if recipe.guard == "replay" and not (replay_found and recipe.replay_share > 0):
        raise ValueError("--guard replay: no replay corpus found (give --replay-data-root) or --replay-share is 0")
    if recipe.guard == "auto":
        return "replay" if replay_found and recipe.replay_share > 0 else "distill"
    return recipe.guard


def anchor_of(recipe: Recipe, guard: str) -> dict[str, Any]:
    """The training config's `anchor` (asr/training/acoustic/anchor.py) for a guard."""
    if guard not in GUARD_WEIGHTS:
        return {"kind": "none", "weight": 0.0}
    weight = GUARD_WEIGHTS[guard] if recipe.guard_weight is None else recipe.guard_weight
    return {"kind": guard, "weight": weight}


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

