"""Which pronunciation a phone model trains on, for words the lexicon gives several (`tokenizer.pronunciations`).

"first" trains every word on its usual pronunciation (the lexicon's first). "aligned" lets the model being
trained choose, each step: for every word with several pronunciations (THE: DH AH or DH IY; TO: T UW, T IH or
T AH) the utterance's CTC loss is computed with that word's other spellings in place of its first, the rest of
the utterance unchanged, and the word trains on the spelling the model scores best. The words are chosen one at
a time against the first spellings of the others (they rarely share frames, so their choices hardly interact).
The choice costs one CTC loss without gradient per alternative, on the log-probs the step computes anyway.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from asr.text.tokenizer import Tokenizer

CHOICES = ("first", "aligned")


class Alternatives:
    """An utterance's words with more than one spelling: (start, end) of the word's first spelling in the
    targets, and its other spellings as ids. (A plain class: Lightning moves a batch's tensors to the device
    through lists, tuples and dataclasses, and has nothing to move here.)"""

    def __init__(self, words: tuple[tuple[int, int, tuple[tuple[int, ...], ...]], ...]):
        self.words = words


def targets_and_alternatives(tokenizer: Tokenizer, text: str) -> tuple[list[int], Alternatives]:
    """`tokenizer.encode(text)` and the alternatives of its words (normalised `text`, a phone tokenizer)."""
    targets, words = [], []
    for spellings in tokenizer.word_spellings(text):
        if len(spellings) > 1:
            words.append((len(targets), len(targets) + len(spellings[0]), tuple(map(tuple, spellings[1:]))))
        targets.extend(spellings[0])
    return targets, Alternatives(tuple(words))


@torch.no_grad()
def choose(logprobs: Tensor, out_lens: Tensor, targets: Tensor, target_lens: Tensor,
           alternatives: list[Alternatives]) -> tuple[Tensor, Tensor]:
    """The targets (B, U') and their lengths (B,) with each word spelled as the model aligns best.

    logprobs (B, T, V) and out_lens (B,) as the encoder gives them; targets (B, U) and target_lens (B,) spelled
    with the first pronunciations; alternatives[b] the words of utterance b that have others."""
    firsts = [targets[b, :target_lens[b]].tolist() for b in range(len(alternatives))]
    rows, sequences, owners = [], [], []  # candidate -> its utterance, its ids, (utterance, word, spelling)
    for b, (first, alts) in enumerate(zip(firsts, alternatives)):
        if not alts.words:
            continue
        rows.append(b), sequences.append(first), owners.append((b, -1, -1))
        for w, (start, end, others) in enumerate(alts.words):
            for k, other in enumerate(others):
                rows.append(b), sequences.append(first[:start] + list(other) + first[end:]), owners.append((b, w, k))
    if not rows:
        return targets, target_lens
    index = torch.tensor(rows)
    padded = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in sequences], batch_first=True)
    lens = torch.tensor([len(s) for s in sequences])
    losses = F.ctc_loss(logprobs[index].transpose(0, 1).float(), padded, out_lens[index], lens, blank=0,
                        reduction="none")  # (N,): inf where a spelling cannot fit the frames
    base = {b: loss for (b, w, _), loss in zip(owners, losses.tolist()) if w < 0}
    best: dict[tuple[int, int], tuple[float, int]] = {}
    for (b, w, k), loss in zip(owners, losses.tolist()):
        if w >= 0 and loss < best.get((b, w), (base[b], -1))[0]:
            best[b, w] = (loss, k)
    chosen = [list(first) for first in firsts]
    for (b, w), (_, k) in sorted(best.items(), key=lambda item: -item[0][1]):  # right to left: spans stay valid
        start, end, others = alternatives[b].words[w]
        chosen[b][start:end] = others[k]
    return (torch.nn.utils.rnn.pad_sequence([torch.tensor(c, dtype=targets.dtype) for c in chosen], batch_first=True),
            torch.tensor([len(c) for c in chosen], dtype=target_lens.dtype))
