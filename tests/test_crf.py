"""CTC-CRF (asr/training/acoustic/crf.py) against a brute-force sum over every frame-label path on tiny cases."""
from __future__ import annotations

import itertools
from pathlib import Path
import math

import pytest
import torch
import torch.nn.functional as F

from asr.training.acoustic.crf import DenominatorGraph, PhoneLM, crf_loss, feasible, log_partition

SENTENCES = [[1, 2, 3], [2, 2, 1], [3, 1], [1, 3, 3, 2], [2]]  # unit ids (0 is blank)


def collapse(path: tuple[int, ...]) -> list[int]:
    """CTC's B: merge repeats, drop blanks."""
    return [u for i, u in enumerate(path) if u != 0 and (i == 0 or path[i - 1] != u)]


def brute_log_z(logprobs: torch.Tensor, lm: PhoneLM) -> float:
    """log of sum over every path pi of prod_t y_t(pi_t) * p_LM(B(pi))."""
    frames, vocab = logprobs.shape
    total = 0.0
    for path in itertools.product(range(vocab), repeat=frames):
        p_lm = lm.prob(collapse(path))
        if p_lm:
            total += math.exp(sum(logprobs[t, u].item() for t, u in enumerate(path))) * p_lm
    return math.log(total)


def brute_ctc(logprobs: torch.Tensor, target: list[int]) -> float:
    """-log of sum over the paths that collapse to `target`."""
    frames, vocab = logprobs.shape
    total = sum(math.exp(sum(logprobs[t, u].item() for t, u in enumerate(path)))
                for path in itertools.product(range(vocab), repeat=frames) if collapse(path) == target)
    return -math.log(total)


@pytest.mark.parametrize("order", [2, 3])
def test_log_z_equals_the_sum_over_every_path(order):
    torch.manual_seed(order)
    lm = PhoneLM.estimate(SENTENCES, order)
    graph = DenominatorGraph(lm)
    lengths = torch.tensor([6, 4, 5])  # unequal lengths in one batch
    logprobs = torch.randn(3, 6, 4, dtype=torch.float64).log_softmax(-1)
    got = log_partition(logprobs, lengths, graph)
    for b, n in enumerate(lengths.tolist()):
        assert got[b].item() == pytest.approx(brute_log_z(logprobs[b, :n], lm), abs=1e-9)


@pytest.mark.parametrize("order", [2, 3])
def test_the_sparse_graph_computes_what_the_dense_one_does(order, monkeypatch):
    lm = PhoneLM.estimate(SENTENCES, order)
    logprobs = torch.randn(2, 7, 4, dtype=torch.float64).log_softmax(-1).requires_grad_()
    lengths = torch.tensor([7, 5])
    dense = DenominatorGraph(lm)
    monkeypatch.setattr(DenominatorGraph, "DENSE_UP_TO", 0)
    sparse = DenominatorGraph(lm)
    assert dense.dense and not sparse.dense
    (grad_dense,) = torch.autograd.grad(log_partition(logprobs, lengths, dense).sum(), logprobs)
    (grad_sparse,) = torch.autograd.grad(log_partition(logprobs, lengths, sparse).sum(), logprobs)
    assert torch.allclose(log_partition(logprobs, lengths, dense), log_partition(logprobs, lengths, sparse))
    assert torch.allclose(grad_dense, grad_sparse)


def test_loss_is_log_z_plus_the_weighted_ctc_loss():
    torch.manual_seed(0)
    lm = PhoneLM.estimate(SENTENCES, 2)
    graph = DenominatorGraph(lm)
    logprobs = torch.randn(2, 6, 4, dtype=torch.float64).log_softmax(-1)
    targets, target_lens = torch.tensor([[1, 2, 3], [3, 1, 0]]), torch.tensor([3, 2])
    out_lens = torch.tensor([6, 5])
    want = sum(brute_log_z(logprobs[b, :n], lm) + 1.1 * brute_ctc(logprobs[b, :n], targets[b, :m].tolist())
               for b, (n, m) in enumerate(zip(out_lens.tolist(), target_lens.tolist())))
    got = crf_loss(logprobs, out_lens, targets, target_lens, graph, ctc_weight=0.1)
    assert got.item() == pytest.approx(want, abs=1e-9)
    # -log p_CRF(l|x) = log Z - log p_CTC(l|x) - log p_LM(l) >= 0: the right sentence is one of Z's
    for b in range(2):
        n, m = out_lens[b].item(), target_lens[b].item()
        target = targets[b, :m].tolist()
        neg_log_p = brute_log_z(logprobs[b, :n], lm) + brute_ctc(logprobs[b, :n], target) - math.log(lm.prob(target))
        assert neg_log_p > 0


def test_gradcheck_of_the_custom_backward():
    lm = PhoneLM.estimate(SENTENCES, 3)
    graph = DenominatorGraph(lm)
    logprobs = torch.randn(2, 5, 4, dtype=torch.float64, requires_grad=True)  # any real inputs, normalised or not
    lengths = torch.tensor([5, 3])
    assert torch.autograd.gradcheck(lambda x: log_partition(x, lengths, graph), (logprobs,))


def test_gradient_is_zero_past_an_utterances_end_and_sums_to_one_a_frame():
    graph = DenominatorGraph(PhoneLM.estimate(SENTENCES, 2))
    logprobs = torch.randn(2, 6, 5).log_softmax(-1).requires_grad_()  # float32 in, a unit the graph lacks
    lengths = torch.tensor([6, 4])
    (grad,) = torch.autograd.grad(log_partition(logprobs, lengths, graph).sum(), logprobs)
    assert grad.dtype == torch.float32
    assert torch.allclose(grad[0].sum(-1), torch.ones(6), atol=1e-5)
    assert torch.allclose(grad[1, :4].sum(-1), torch.ones(4), atol=1e-5) and grad[1, 4:].abs().max() == 0
    assert grad[..., 4].abs().max() == 0  # never emitted by the phone LM


def test_sizes_of_the_graph():
    lm = PhoneLM.estimate(SENTENCES, 2)
    graph = DenominatorGraph(lm)
    assert graph.n_states == 1 + 2 * 3  # B_<s>, then B_h and P_h for each of the 3 units
    assert graph.labels.tolist().count(0) == 4
    assert graph.final[graph.start] == 0  # no empty sentence was seen


def test_an_utterance_whose_target_cannot_fit_adds_nothing():
    graph = DenominatorGraph(PhoneLM.estimate(SENTENCES, 2))
    targets, target_lens = torch.tensor([[2, 2, 1], [1, 2, 3]]), torch.tensor([3, 3])
    out_lens = torch.tensor([3, 3])  # "2 2 1" needs 4 frames (a blank between the repeats)
    assert feasible(out_lens, targets, target_lens).tolist() == [False, True]
    logprobs = torch.randn(2, 3, 4, dtype=torch.float64).log_softmax(-1).requires_grad_()
    loss = crf_loss(logprobs, out_lens, targets, target_lens, graph, 0.1)
    only = crf_loss(logprobs[1:], out_lens[1:], targets[1:], target_lens[1:], graph, 0.1)
    assert loss.item() == pytest.approx(only.item())
    loss.backward()
    assert logprobs.grad[0].abs().max() == 0 and torch.isfinite(logprobs.grad).all()


def test_phone_lm_text_and_probabilities(tmp_path):
    lm = PhoneLM.estimate(SENTENCES, 2)
    assert lm.prob([1, 2, 3]) == pytest.approx(2 / 5 * 1 / 4 * 1 / 5 * 1 / 4)  # p(1|<s>) p(2|1) p(3|2) p(</s>|3)
    assert lm.prob([1, 1]) == 0  # 1 was never followed by 1
    lm.write(tmp_path / "lm.txt", names=["<b>", "A", "B", "C"])
    assert "<s> -> A:2 B:2 C:1" in (tmp_path / "lm.txt").read_text().splitlines()
    with pytest.raises(ValueError):
        PhoneLM.estimate(SENTENCES, 1)


def test_a_toy_phone_model_trains_with_ctc_crf_and_writes_its_phone_lm(tmp_path):
    import csv

    from test_phones import needs_data, phone_config, small_lexicon  # noqa: F401 (the toy phone run's config)

    from asr.training.acoustic.train import train
    from helpers import SPEECHOCEAN, small_manifest

    if not SPEECHOCEAN.exists():
        pytest.skip(f"{SPEECHOCEAN} not found")
    manifest = small_manifest(tmp_path, 8)
    cfg = phone_config(tmp_path / "run", manifest, small_lexicon(tmp_path), "trainer.max_steps=4",
                       "criterion=crf", "trainer.precision=auto", "trainer.log_every_n_steps=1")
    train(cfg)
    lines = (tmp_path / "run" / "phone_lm.txt").read_text().splitlines()
    assert lines[0].startswith("<s> -> ") and any(line.startswith("| -> ") for line in lines)
    losses = [float(r["train_loss"]) for r in csv.DictReader(open(tmp_path / "run" / "logs" / "version_0" / "metrics.csv"))
              if r.get("train_loss")]
    assert len(losses) == 4 and all(math.isfinite(x) for x in losses)


def test_an_unknown_criterion_is_refused():
    from asr.training.acoustic.crf import CriterionConfig
    from asr.training.acoustic.train import attach_criterion

    with pytest.raises(ValueError, match="criterion.kind='mmi'"):
        attach_criterion(None, CriterionConfig(kind="mmi"), [], Path("."))
