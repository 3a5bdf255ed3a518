"""The anchor to the starting model (asr/training/acoustic/anchor.py): the posterior KL, the frozen copy and the
starting weights it keeps out of the module's state, and a few steps of training on one batch staying nearer the
starting model's outputs with the distillation anchor than without it."""
from __future__ import annotations

import pytest
import torch

from asr.model.config import EncoderConfig
from asr.model.loader import random_model
from asr.training.acoustic.anchor import Anchor, AnchorConfig, enabled, posterior_kl
from asr.training.acoustic.config import OptimConfig
from asr.training.acoustic.module import CTCModule

CFG = EncoderConfig(d_model=64, n_layers=2, n_heads=2, window=16, dropout=0.0)


def module() -> CTCModule:
    encoder, tokenizer, _ = random_model(CFG, seed=0)
    made = CTCModule(encoder.cfg, OptimConfig(), tokenizer)
    made.encoder.load_state_dict(encoder.state_dict())
    return made


def batch(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"feats": torch.randn(2, 120, 80, generator=g), "feat_lens": torch.tensor([120, 90]),
            "targets": torch.randint(1, 20, (2, 8), generator=g), "target_lens": torch.tensor([8, 5])}


def test_the_posterior_kl_is_zero_for_the_same_outputs_and_ignores_padding() -> None:
    g = torch.Generator().manual_seed(1)
    teacher = torch.log_softmax(torch.randn(2, 6, 5, generator=g), -1)
    student = torch.log_softmax(torch.randn(2, 6, 5, generator=g), -1)
    lengths = torch.tensor([6, 3])
    assert posterior_kl(teacher, teacher, lengths).item() == 0.0
    kl = posterior_kl(student, teacher, lengths)
    assert kl.item() > 0
    padded = student.clone()
    padded[1, 3:] = torch.log_softmax(torch.randn(3, 5, generator=g), -1)  # beyond row 1's real frames
    assert torch.equal(posterior_kl(padded, teacher, lengths), kl)
    by_hand = sum((teacher[b, t].exp() * (teacher[b, t] - student[b, t])).sum() for b, n in enumerate([6, 3])
                  for t in range(n)) / 9
    assert torch.allclose(kl, by_hand)


def test_the_anchor_is_zero_at_the_start_grows_as_the_weights_move_and_stays_out_of_the_state() -> None:
    assert not enabled(AnchorConfig()) and enabled(AnchorConfig("distill", 1.0))
    for kind in ("distill", "l2sp"):
        student = module()
        state, params = set(student.state_dict()), len(list(student.parameters()))
        student.attach_anchor(AnchorConfig(kind, 1.0))
        assert set(student.state_dict()) == state and len(list(student.parameters())) == params
        logprobs, lengths = student.encoder(batch()["feats"], batch()["feat_lens"])
        assert abs(student.anchor.loss(student.encoder, batch(), logprobs, lengths).item()) < 1e-6
        with torch.no_grad():
            signs = torch.arange(student.encoder.ctc.weight.numel()).remainder(3).eq(0).float() * 2 - 1
            # the student moves by 0.05 a weight, up or down (a uniform shift would leave the softmax of the
            # normalised frames as it was); its anchor must not
            student.encoder.ctc.weight.add_(0.05 * signs.view_as(student.encoder.ctc.weight))
        logprobs, lengths = student.encoder(batch()["feats"], batch()["feat_lens"])
        moved = student.anchor.loss(student.encoder, batch(), logprobs, lengths).item()
        assert moved > 1e-4, kind  # well above float noise (a uniform shift gave about 1e-9)
        if kind == "l2sp":
            assert abs(moved - 0.05 ** 2 * student.encoder.ctc.weight.numel()) < 1e-3


def test_l2sp_holds_only_the_weights_that_train() -> None:
    student = module()
    for name, parameter in student.encoder.named_parameters():
        parameter.requires_grad_(not name.startswith("subsampling."))
    anchor = Anchor(AnchorConfig("l2sp", 1.0), student.encoder)
    assert anchor.start and not any(name.startswith("subsampling.") for name in anchor.start)


@pytest.mark.filterwarnings("ignore:You are trying to `self.log\\(\\)`")  # training_step outside a Trainer
def test_training_with_the_distillation_anchor_stays_nearer_the_starting_outputs() -> None:
    def drift(weight: float) -> float:
        torch.manual_seed(0)
        student = module()
        start = Anchor(AnchorConfig("distill", 1.0), student.encoder)  # a frozen copy to measure against
        if weight:
            student.attach_anchor(AnchorConfig("distill", weight))
        optimizer = torch.optim.Adam(student.encoder.parameters(), lr=3e-3)
        for step in range(15):
            optimizer.zero_grad()
            student.training_step(batch(step % 3), step).backward()
            optimizer.step()
        student.encoder.eval()
        with torch.no_grad():
            logprobs, lengths = student.encoder(batch(9)["feats"], batch(9)["feat_lens"])  # a batch never trained on
            return start.loss(student.encoder, batch(9), logprobs, lengths).item()

    assert drift(5.0) < 0.5 * drift(0.0)
