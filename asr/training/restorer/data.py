"""The restorer's training data: cased, punctuated sentences -> word ids, pause ids and per-word labels, batched.

A text file holds one sentence a line (recipes/restorer/prepare.py writes the train and held-out
splits). Each sentence becomes its normalised words with a case class and a following mark per word
(`asr.text.restore.labels.labelled`); sentences that do not map word for word are skipped. While training,
a sentence is joined with a random other one with probability `join_prob`, so that the model also
sees a final holding more than one sentence. For a network that reads pauses, a training sentence is
also given simulated recognition errors with probability `noisy_prob` (`asr.text.restore.noise.corrupt`) and
simulated pauses; the recognizer's own finals of training audio (`asr_train`, made by
recipes/restorer/asr_outputs.py) join the epoch `real_repeat` times each with their real pauses, labelled
by `asr.text.restore.align`; and any item loses its pauses with probability `pause_drop` (plain text).
"""
from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import lightning as L
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from asr.text.restore.align import carry_labels
from asr.text.restore.format import UNKNOWN
from asr.text.restore.labels import Labelled, labelled, pause_ids, word_pauses
from asr.text.restore.model import PAD
from asr.text.restore.noise import Confusions, NoiseConfig, Pauses, corrupt

IGNORE = -100  # label of padding (cross-entropy skips it)


@dataclass
class RestorerDataConfig:
    train: str = "data/restorer/train.txt"  # one cased, punctuated sentence a line
    valid: str = "data/restorer/held.txt"  # the held-out split (never trained on)
    batch_size: int = 64  # sentences per batch
    join_prob: float = 0.25  # share of training items that are two sentences in a row
    max_words: int = 64  # longer items are cut
    num_workers: int = 0
    # with a network that reads pauses (model.pause_buckets > 0):
    asr_train: str = "data/restorer/asr_train.jsonl"  # recognized training audio ("" or missing: none)
    real_repeat: int = 4  # times each recognized final is seen per epoch
    noisy_prob: float = 0.5  # share of text items given simulated recognition errors
    pause_drop: float = 0.4  # share of items given no pauses (as plain text is restored)
    pause_tempo: float = 0.3  # sigma of the log tempo factor of an item's simulated pauses
    noise: NoiseConfig = field(default_factory=NoiseConfig)


def read_sentences(path: str | Path) -> list[Labelled]:
    """The labelled sentences of a text file (one a line); lines that do not map word for word are skipped."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [item for line in lines if (item := labelled(line)) is not None]


def read_recognized(path: str | Path) -> list[tuple[Labelled, list[float]]]:
    """The finals of recognized training audio (recipes/restorer/asr_outputs.py JSON lines), each with the
    labels carried from its item's reference (`asr.text.restore.align`) and the pause before each word."""
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        ref, finals = labelled(record["text"]), [f for f in record["finals"] if f]
        if ref is None or not finals:
            continue
        target = carry_labels(ref, [w for final in finals for w, _, _ in final])
        at = 0
        for final in finals:
            n = len(final)
            item = Labelled(target.words[at:at + n], target.cases[at:at + n], target.marks[at:at + n])
            out.append((item, word_pauses([s for _, s, _ in final], [e for _, _, e in final])))
            at += n
    return out


def build_vocab(sentences: list[Labelled], size: int) -> list[str]:
    """["<pad>", "<unk>", then the size - 2 most frequent words (ties in alphabetical order)]."""
    counts = Counter(w for s in sentences for w in s.words)
    ranked = sorted(counts, key=lambda w: (-counts[w], w))
    return ["<pad>", "<unk>"] + ranked[: size - 2]


class RestorerDataset(Dataset):
    """Item i -> (ids (T,), pause ids (T,), cases (T,), marks (T,)): the sentences (training items may be
    two joined, noisy, with simulated pauses), then `real` items (recognized finals) `real_repeat` times."""

    def __init__(self, sentences: list[Labelled], vocab: list[str], join_prob: float = 0.0, max_words: int = 64,
                 seed: int = 0, real: list[tuple[Labelled, list[float]]] = (), real_repeat: int = 1,
                 pauses: Pauses | None = None, confusions: Confusions | None = None, noisy_prob: float = 0.0,
                 pause_drop: float = 0.0, noise: NoiseConfig = NoiseConfig()):
        self.sentences, self.join_prob, self.max_words = sentences, join_prob, max_words
        self.real, self.real_repeat = list(real), real_repeat
        self.pauses, self.confusions, self.noisy_prob, self.pause_drop, self.noise = \
            pauses, confusions, noisy_prob, pause_drop, noise
        self.index = {w: i for i, w in enumerate(vocab)}
        self.rng = random.Random(seed)

    def __len__(self) -> int:
        return len(self.sentences) + len(self.real) * self.real_repeat

    def item(self, i: int) -> tuple[Labelled, list[float] | None]:
        """Item i before ids: its words and labels, and its pauses (None: unknown)."""
        if i >= len(self.sentences):
            item, pauses = self.real[(i - len(self.sentences)) % len(self.real)]
        else:
            item = self.sentences[i]
            if self.join_prob > 0 and self.rng.random() < self.join_prob:
                other = self.sentences[self.rng.randrange(len(self.sentences))]
                item = Labelled(item.words + other.words, item.cases + other.cases, item.marks + other.marks)
            if self.confusions is not None and self.rng.random() < self.noisy_prob:
                item = corrupt(item, self.confusions, self.rng, self.noise)
            pauses = self.pauses.draw(item.marks, self.rng) if self.pauses is not None else None
        if pauses is not None and self.rng.random() < self.pause_drop:
            pauses = None
        return item, pauses

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        item, pauses = self.item(i)
        n = min(len(item.words), self.max_words)
        ids = [self.index.get(w, UNKNOWN) for w in item.words[:n]]
        paused = pause_ids(None if pauses is None else pauses[:n], n)
        return torch.tensor(ids), torch.tensor(paused), torch.tensor(item.cases[:n]), torch.tensor(item.marks[:n])


def collate(items: list[tuple[Tensor, Tensor, Tensor, Tensor]]) -> dict[str, Tensor]:
    """Padded batch: ids and pauses (B, T) with PAD, cases and marks (B, T) with IGNORE, lengths (B,)."""
    lengths = torch.tensor([len(item[0]) for item in items])
    width = int(lengths.max())

    def pad(column: int, value: int) -> Tensor:
        out = torch.full((len(items), width), value, dtype=torch.int64)
        for row, item in enumerate(items):
            out[row, :len(item[column])] = item[column]
        return out
    return {"ids": pad(0, PAD), "pauses": pad(1, PAD), "cases": pad(2, IGNORE), "marks": pad(3, IGNORE),
            "lengths": lengths}


class RestorerDataModule(L.LightningDataModule):
    """Training items as `RestorerDataset` mixes them (with `pauses` and `confusions` for a network that reads
    pauses); validation on the held-out sentences as they are, without pauses."""

    def __init__(self, cfg: RestorerDataConfig, vocab: list[str], train: list[Labelled], valid: list[Labelled],
                 seed: int = 0, real: list[tuple[Labelled, list[float]]] = (), pauses: Pauses | None = None,
                 confusions: Confusions | None = None):
        super().__init__()
        self.cfg, self.vocab, self.train_items, self.valid_items, self.seed = cfg, vocab, train, valid, seed
        self.real, self.pauses, self.confusions = real, pauses, confusions

    def train_dataloader(self) -> DataLoader:
        cfg = self.cfg
        data = RestorerDataset(self.train_items, self.vocab, cfg.join_prob, cfg.max_words, self.seed, self.real,
                               cfg.real_repeat, self.pauses, self.confusions, cfg.noisy_prob,
                               cfg.pause_drop if self.pauses is not None else 0.0, cfg.noise)
        return DataLoader(data, batch_size=cfg.batch_size, shuffle=True, collate_fn=collate,
                          num_workers=cfg.num_workers, generator=torch.Generator().manual_seed(self.seed))

    def val_dataloader(self) -> DataLoader:
        data = RestorerDataset(self.valid_items, self.vocab, 0.0, self.cfg.max_words)
        return DataLoader(data, batch_size=self.cfg.batch_size, shuffle=False, collate_fn=collate,
                          num_workers=self.cfg.num_workers)
