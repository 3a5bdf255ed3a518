"""Keeping a fine-tune near the model it started from, without the data that model learnt on (a guard
against forgetting where no replay corpus is at hand).

One of two losses beside CTC (`AnchorConfig.kind`), scaled by `weight`:

- "distill" (learning without forgetting): a frozen copy of the starting model reads the same augmented
  batch, and the student's CTC posteriors learn its posteriors as a second target: KL(start || student) per
  real output frame, averaged over the frames. It costs a forward pass of the copy a step (no backward).
- "l2sp": the squared distance of the trainable weights from their starting values, summed (L2-SP).

The anchor is kept out of the module's parameters and checkpoints: a resumed run rebuilds it from the run's
initial model (the starting weights), so the exported model is the student alone.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import Tensor, nn

KINDS = ("none", "distill", "l2sp")


@dataclass
class AnchorConfig:
    kind: str = "none"  # none | distill | l2sp
    weight: float = 0.0  # the anchor loss's weight beside CTC (0: off)


def enabled(cfg: AnchorConfig) -> bool:
    """Whether a run is anchored (also for Hydra's DictConfig); ValueError for an unknown kind."""
    if cfg.kind not in KINDS:
        raise ValueError(f"anchor.kind={cfg.kind}: one of {', '.join(KINDS)}")
    return cfg.kind != "none" and cfg.weight > 0


def posterior_kl(student: Tensor, teacher: Tensor, lengths: Tensor) -> Tensor:
    """Mean over the real frames of KL(teacher || student). student, teacher (B, T, V) log-probabilities of
    the same batch; lengths (B,) the real frames of each row."""
    mask = torch.arange(student.shape[1], device=student.device)[None] < lengths[:, None]  # (B, T)
    kl = (teacher.exp() * (teacher - student)).sum(dim=-1)  # (B, T)
    return (kl * mask).sum() / mask.sum().clamp_min(1)


class Anchor:
    """The starting model's state for one kind of anchor: a frozen copy of the encoder ("distill") or the
    starting values of its trainable weights ("l2sp"). Built from the encoder before training moves it."""

    def __init__(self, cfg: AnchorConfig, encoder: nn.Module):
        self.kind, self.weight = cfg.kind, cfg.weight
        self.teacher: nn.Module | None = None
        self.start: dict[str, Tensor] = {}
        if self.kind == "distill":
            self.teacher = copy.deepcopy(encoder).eval().requires_grad_(False)
        else:
            self.start = {name: p.detach().clone() for name, p in encoder.named_parameters() if p.requires_grad}

    def to(self, device: torch.device) -> Anchor:
        if self.teacher is not None:
            self.teacher.to(device)
        self.start = {name: value.to(device) for name, value in self.start.items()}
        return self

    def loss(self, encoder: nn.Module, batch: dict[str, Tensor], logprobs: Tensor, lengths: Tensor) -> Tensor:
        """The unweighted anchor loss of the forward pass just run: `logprobs` (B, T', V) and `lengths` (B,)
        are the student's on `batch` (at the chunk the student ran with)."""
        if self.teacher is not None:
            self.teacher.set_chunk(encoder.cfg.chunk)
            with torch.no_grad():
                teacher, _ = self.teacher(batch["feats"], batch["feat_lens"])  # (B, T', V)
            return posterior_kl(logprobs, teacher, lengths)
        params = dict(encoder.named_parameters())
        return sum(((params[name] - value) ** 2).sum() for name, value in self.start.items())
