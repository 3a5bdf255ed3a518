"""Distillation from a full-context teacher's cached frames into one block of the streaming student.

The student's block `block` output (B, T', D) goes through a training-only projection to the teacher's
width; the loss per frame is DistilHuBERT's: L1 distance minus log-sigmoid of the cosine similarity,
against the teacher's frame at the same time (asr/training/acoustic/whisper/teacher.py caches them at the
student's 40 ms rate from the clean audio). A view played faster or slower (speed perturbation) has fewer or more frames
than the clean audio; the teacher's frames are stretched to the view's length by linear interpolation,
which is exact for a change of speed. The projection is not part of the exported model.

An experiment that lost, kept only to reproduce a published table: arms b and c of `recipes/native/README.md`
(`distill.weight` > 0 in `conf/experiment/native_distill.yaml`), whose rows are in `benchmarks/native/README.md`
(no gain at equal compute, 2026-12-02). Every other config leaves it off (`enabled`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass
class DistillConfig:
    teacher_dir: str | None = None  # the teacher's cache folder (python -m asr.training.acoustic.whisper.teacher);
    # None: off
    weight: float = 0.0  # the distillation loss's weight beside CTC (chosen by dev)
    block: int = 8  # the student block (counted from 1) whose output learns the teacher's frames
    teacher_dim: int = 512  # the teacher's width (Whisper base: 512, tiny.en: 384)


def enabled(cfg: DistillConfig) -> bool:
    """Whether a run distils (a teacher cache and a weight above zero; also for Hydra's DictConfig)."""
    return cfg.teacher_dir is not None and cfg.weight > 0


def stretch(teacher: Tensor, length: int) -> Tensor:
    """One utterance's teacher frames (T_t, D) resampled in time to `length` frames (length, D)."""
    if teacher.shape[0] == length or teacher.shape[0] == 0:
        return teacher[:length]
    return F.interpolate(teacher.T[None], size=length, mode="linear", align_corners=False)[0].T


def distill_loss(student: Tensor, lengths: Tensor, teacher: Tensor, teacher_lengths: Tensor) -> Tensor:
    """Mean over the real frames of L1(s, t) - log sigmoid(cos(s, t)).

    student (B, T', D_t) projected student frames, lengths (B,) their real counts; teacher (B, T_t, D_t),
    teacher_lengths (B,) the cached frames of each row's clean audio."""
    losses, frames = [], 0
    for b in range(student.shape[0]):
        n = int(lengths[b])
        if n == 0 or int(teacher_lengths[b]) == 0:
            continue
        target = stretch(teacher[b, :int(teacher_lengths[b])].float(), n)
        s = student[b, :n]
        l1 = (s - target).abs().mean(dim=-1)  # (n,)
        cosine = F.cosine_similarity(s, target, dim=-1)  # (n,)
        losses.append((l1 - F.logsigmoid(cosine)).sum())
        frames += n
    return torch.stack(losses).sum() / frames if losses else student.sum() * 0.0


class DistillHead(nn.Module):
    """Catches the student block's output during a forward pass and scores it against the teacher."""

    def __init__(self, cfg: DistillConfig, encoder: nn.Module):
        super().__init__()
        if not 1 <= cfg.block <= len(encoder.blocks):
            raise ValueError(f"distill.block={cfg.block}: the student has blocks 1..{len(encoder.blocks)}")
        self.project = nn.Linear(encoder.cfg.d_model, cfg.teacher_dim)
        self.caught: Tensor | None = None
        encoder.blocks[cfg.block - 1].register_forward_hook(self._catch)

    def _catch(self, module: nn.Module, inputs: tuple, output: tuple) -> None:
        self.caught = output[0]  # (B, T', D): a Block returns (x, k_cache, v_cache, conv_cache)

    def loss(self, lengths: Tensor, teacher: Tensor, teacher_lengths: Tensor) -> Tensor:
        """The loss of the block output caught in the forward pass just run."""
        if self.caught is None:
            raise RuntimeError("DistillHead.loss before a forward pass of the student")
        student, self.caught = self.project(self.caught), None
        return distill_loss(student, lengths, teacher, teacher_lengths)
