"""CTC-CRF: CTC's topology trained against every sentence a phone n-gram allows (Xiang and Ou, 2019; CAT).

    p(l | x) = sum over the CTC paths pi of l of prod_t y_t(pi_t) * p_LM(l) / Z(x)
    Z(x)     = sum over every frame-label path pi of prod_t y_t(pi_t) * p_LM(B(pi))    (B: CTC's collapse)
    loss     = log Z(x) + (1 + lambda) * CTC loss(l | x)    (-log p(l | x) + lambda * CTC, less the constant log p_LM(l))

The numerator is `F.ctc_loss` as it is. The denominator is a graph built here from plain arrays: for each phone
LM history h a blank state B_h (label blank) and a phone state P_h (label: h's last phone), arcs of one frame each

    B_h -> B_h, P_h -> P_h, P_h -> B_h                            weight 1
    B_h -> P_h', P_h -> P_h'   (h' = h shifted by phone p)        weight p(p | h)   (P_h -> P_h' not when p = last(h))
    final weight of B_h and P_h                                   p(</s> | h)

Every arc into a state carries that state's label and the graph is deterministic, so log Z is an HMM forward
pass with state emissions, alpha_t = (alpha_{t-1} A) * y_t[label], in float64 with each frame's alpha rescaled
to sum to one (Kaldi's way). Its gradient with respect to log y_t(k) is the posterior of the states labelled
k at frame t (forward-backward), so the backward of log Z is a product, not a second autograd graph.

The phone LM is a maximum-likelihood n-gram over the successors seen in the training transcripts, without
back-off (Kaldi's chain denominator makes the same choice): every training sentence has p_LM > 0.
"""
from __future__ import annotations

import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import torch
import torch.nn.functional as F
from torch import Tensor

from asr.text.normalize import normalize

BOS, EOS = -1, -2  # sentence start (padding of the first history) and end (a successor), beside the unit ids


def _shift(history: tuple[int, ...], unit: int) -> tuple[int, ...]:
    """The history after `unit`: its oldest unit dropped, `unit` appended."""
    return (history + (unit,))[1:]


@dataclass
class CriterionConfig:
    kind: str = "ctc"  # ctc | crf (CTC-CRF: a phone n-gram denominator)
    order: int = 2  # crf: the denominator's n-gram order (2: bigram, 3: trigram)
    ctc_weight: float = 0.1  # crf: lambda, the CTC loss's weight added to the CRF's (CAT: 0.01 to 0.1)


class PhoneLM:
    """A maximum-likelihood n-gram over unit ids: `counts[history][successor]`, history the last order-1 ids
    (padded with BOS), successor an id or EOS."""

    def __init__(self, order: int, counts: dict[tuple[int, ...], Counter]):
        self.order, self.counts = order, counts

    @classmethod
    def estimate(cls, sentences: Iterable[list[int]], order: int) -> PhoneLM:
        if order < 2:
            raise ValueError(f"criterion.order={order}: the denominator's phone LM is a bigram or longer")
        counts: dict[tuple[int, ...], Counter] = defaultdict(Counter)
        for ids in sentences:
            history = (BOS,) * (order - 1)
            for unit in [*ids, EOS]:
                counts[history][unit] += 1
                history = _shift(history, unit)
        return cls(order, dict(counts))

    @classmethod
    def of_transcripts(cls, texts: Iterable[str], encode: Callable[[str], list[int]], order: int) -> PhoneLM:
        """The n-gram of transcripts as written (each distinct one once, through the one normaliser), in the units
        `encode` spells them in (a tokenizer's, as the training targets are)."""
        return cls.estimate(map(encode, sorted({normalize(text) for text in texts})), order)

    def successors(self, history: tuple[int, ...]) -> dict[int, float]:
        """p(unit | history) for each unit seen after `history` (EOS included)."""
        seen = self.counts.get(history, Counter())
        total = sum(seen.values())
        return {unit: n / total for unit, n in seen.items()}

    def prob(self, ids: list[int]) -> float:
        """p(ids </s>) under the model (0 for a sentence with an unseen n-gram)."""
        p, history = 1.0, (BOS,) * (self.order - 1)
        for unit in [*ids, EOS]:
            p *= self.successors(history).get(unit, 0.0)
            history = _shift(history, unit)
        return p

    def write(self, path: Path, names: list[str] | None = None) -> None:
        """The counts as text, a history a line: `h1 h2 -> unit:count unit:count ...` (unit names where given)."""
        def name(unit: int) -> str:
            return {BOS: "<s>", EOS: "</s>"}.get(unit) or (names[unit] if names else str(unit))
        lines = [" ".join(map(name, h)) + " -> " + " ".join(f"{name(u)}:{n}" for u, n in sorted(c.items()))
                 for h, c in sorted(self.counts.items())]
        path.write_text("\n".join(lines) + "\n")


class DenominatorGraph:
    """The phone LM composed with CTC's topology (the module doc): `labels` (S,) each state's unit, `start` the
    state before the first frame, `final` (S,) float64 end weights, and the (S, S) float64 transition weights,
    dense for small graphs (a bigram's), sparse CSR for large ones (a trigram's)."""

    DENSE_UP_TO = 512  # states

    def __init__(self, lm: PhoneLM):
        histories = sorted(lm.counts)  # every history a sentence continues from (each has at least </s>)
        index: dict[tuple[str, tuple[int, ...]], int] = {}
        labels: list[int] = []
        for h in histories:
            index["B", h] = len(labels)
            labels.append(0)
            if h and h[-1] != BOS:
                index["P", h] = len(labels)
                labels.append(h[-1])
        rows, cols, weights = [], [], []

        def arc(source: int, target: int, weight: float) -> None:
            rows.append(source), cols.append(target), weights.append(weight)

        final = torch.zeros(len(labels), dtype=torch.float64)
        for h in histories:
            b, p = index["B", h], index.get(("P", h))
            arc(b, b, 1.0)
            if p is not None:
                arc(p, p, 1.0)
                arc(p, b, 1.0)
            for unit, prob in lm.successors(h).items():
                if unit == EOS:
                    final[b] = prob
                    if p is not None:
                        final[p] = prob
                    continue
                target = index["P", _shift(h, unit)]
                arc(b, target, prob)
                if p is not None and unit != h[-1]:
                    arc(p, target, prob)
        self.labels = torch.tensor(labels)
        self.start, self.final = index["B", (BOS,) * (lm.order - 1)], final
        self.n_arcs = len(weights)
        size = (len(labels), len(labels))
        self.dense = len(labels) <= self.DENSE_UP_TO
        with warnings.catch_warnings():  # "sparse support is in beta": building it and sparse @ dense is all this uses
            warnings.simplefilter("ignore", UserWarning)
            coo = torch.sparse_coo_tensor(torch.tensor([rows, cols]), torch.tensor(weights, dtype=torch.float64), size)
            self.forward_op = coo.to_dense() if self.dense else coo.coalesce().to_sparse_csr()  # A: alpha @ A
            self.backward_op = self.forward_op.T.contiguous() if self.dense else coo.t().coalesce().to_sparse_csr()

    @property
    def n_states(self) -> int:
        return len(self.labels)

    def step(self, alpha: Tensor) -> Tensor:
        """(B, S) -> (B, S): alpha @ A."""
        return alpha @ self.forward_op if self.dense else (self.backward_op @ alpha.T).T

    def step_back(self, beta: Tensor) -> Tensor:
        """(B, S) -> (B, S): beta @ A^T."""
        return beta @ self.backward_op if self.dense else (self.forward_op @ beta.T).T


class _LogPartition(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logprobs: Tensor, lengths: Tensor, graph: DenominatorGraph) -> Tensor:
        batch, frames, _ = logprobs.shape
        emit = logprobs.detach().double().exp()[:, :, graph.labels]  # (B, T, S)
        alpha = torch.zeros(batch, graph.n_states, dtype=torch.float64)
        alpha[:, graph.start] = 1.0
        alphas = torch.empty(batch, frames, graph.n_states, dtype=torch.float64)
        log_z = torch.zeros(batch, dtype=torch.float64)
        for t in range(frames):
            live = (t < lengths).unsqueeze(1)
            step = graph.step(alpha) * emit[:, t]
            scale = step.sum(1, keepdim=True).clamp_min(1e-300)
            alpha = torch.where(live, step / scale, alpha)
            log_z += torch.where(live[:, 0], scale[:, 0].log(), 0.0)
            alphas[:, t] = alpha
        last = alphas[torch.arange(batch), (lengths - 1).clamp_min(0)]  # (B, S)
        log_z += (last @ graph.final).log()
        if logprobs.requires_grad:
            ctx.save_for_backward(_posteriors(alphas, emit, lengths, graph, logprobs.shape[-1]))
        return log_z.to(logprobs.dtype)

    @staticmethod
    def backward(ctx, grad: Tensor):
        occupancy, = ctx.saved_tensors  # (B, T, V): d log Z / d log y_t(k)
        return (grad.to(occupancy.dtype)[:, None, None] * occupancy).to(grad.dtype), None, None


def _posteriors(alphas: Tensor, emit: Tensor, lengths: Tensor, graph: DenominatorGraph, vocab: int) -> Tensor:
    """(B, T, V): each unit's posterior at each frame over the denominator's paths (zero past a length)."""
    batch, frames, states = alphas.shape
    beta = graph.final.expand(batch, states).clone()
    posteriors = torch.zeros_like(alphas)
    for t in range(frames - 1, -1, -1):
        if t < frames - 1:
            back = graph.step_back(emit[:, t + 1] * beta)
            back = back / back.sum(1, keepdim=True).clamp_min(1e-300)
            beta = torch.where((t < lengths - 1).unsqueeze(1), back, beta)
        beta = torch.where((t == lengths - 1).unsqueeze(1), graph.final.expand(batch, states), beta)
        joint = alphas[:, t] * beta
        joint = joint / joint.sum(1, keepdim=True).clamp_min(1e-300)
        posteriors[:, t] = torch.where((t < lengths).unsqueeze(1), joint, 0.0)
    return (posteriors @ F.one_hot(graph.labels, vocab).double()).nan_to_num_(0.0)  # (B, T, V)


def log_partition(logprobs: Tensor, lengths: Tensor, graph: DenominatorGraph) -> Tensor:
    """log Z(x) (B,) of frame log-probabilities (B, T, V) over their first `lengths` frames. The graph's
    units are ids below V; the gradient is float64 where `logprobs` are."""
    vocab = logprobs.shape[-1]
    if int(graph.labels.max()) >= vocab:
        raise ValueError(f"the denominator has unit {int(graph.labels.max())}, the model {vocab} units")
    return _LogPartition.apply(logprobs, lengths, graph)


def feasible(out_lens: Tensor, targets: Tensor, target_lens: Tensor) -> Tensor:
    """(B,) bool: the target fits its frames under CTC (one frame a unit, and one more between repeats)."""
    positions = torch.arange(max(targets.shape[1] - 1, 0))  # (none in a batch whose targets are all empty)
    repeats = ((targets[:, 1:] == targets[:, :-1]) & (positions < target_lens.unsqueeze(1) - 1)).sum(1)
    return out_lens >= target_lens + repeats


def crf_loss(logprobs: Tensor, out_lens: Tensor, targets: Tensor, target_lens: Tensor, graph: DenominatorGraph,
             ctc_weight: float) -> Tensor:
    """The CTC-CRF loss summed over the batch: log Z + (1 + ctc_weight) * CTC loss, for logprobs (B, T, V);
    an utterance whose target cannot fit its frames adds nothing (as CTC's zero_infinity), and one with an empty
    target (noise alone) its CTC loss only: all blank."""
    ok = feasible(out_lens, targets, target_lens) & (target_lens > 0)
    ctc = F.ctc_loss((logprobs if logprobs.dtype == torch.float64 else logprobs.float()).transpose(0, 1), targets, out_lens, target_lens, blank=0, reduction="none",
                     zero_infinity=True)
    log_z = log_partition(logprobs.double(), out_lens, graph)
    ok &= log_z.detach().isfinite()
    return (torch.where(ok, log_z, 0.0).sum() + (1 + ctc_weight) * ctc.double().sum()).to(logprobs.dtype)
