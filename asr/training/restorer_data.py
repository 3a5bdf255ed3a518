"""The restorer's training data: cased, punctuated sentences -> word ids and per-word labels, batched.

A text file holds one sentence a line (recipes/restorer/prepare.py writes the train and held-out
splits). Each sentence becomes its normalised words with a case class and a following mark per word
(`asr.restore.labels.labelled`); sentences that do not map word for word are skipped. While training,
a sentence is joined with a random other one with probability `join_prob`, so that the model also
sees a final holding more than one sentence.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import lightning as L
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from asr.restore.labels import Labelled, labelled
from asr.restore.model import PAD
from asr.restore.restorer import UNKNOWN

IGNORE = -100  # label of padding (cross-entropy skips it)


@dataclass
class RestorerDataConfig:
    train: str = "data/restorer/train.txt"  # one cased, punctuated sentence a line
    valid: str = "data/restorer/held.txt"  # the held-out split (never trained on)
    batch_size: int = 64  # sentences per batch
    join_prob: float = 0.25  # share of training items that are two sentences in a row
    max_words: int = 64  # longer items are cut
    num_workers: int = 0


def read_sentences(path: str | Path) -> list[Labelled]:
    """The labelled sentences of a text file (one a line); lines that do not map word for word are skipped."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [item for line in lines if (item := labelled(line)) is not None]


def build_vocab(sentences: list[Labelled], size: int) -> list[str]:
    """["<pad>", "<unk>", then the size - 2 most frequent words (ties in alphabetical order)]."""
    counts = Counter(w for s in sentences for w in s.words)
    ranked = sorted(counts, key=lambda w: (-counts[w], w))
    return ["<pad>", "<unk>"] + ranked[: size - 2]


class RestorerDataset(Dataset):
    """Item i -> (ids (T,), cases (T,), marks (T,)); training items may be two sentences joined."""

    def __init__(self, sentences: list[Labelled], vocab: list[str], join_prob: float = 0.0, max_words: int = 64,
                 seed: int = 0):
        self.sentences, self.join_prob, self.max_words = sentences, join_prob, max_words
        self.index = {w: i for i, w in enumerate(vocab)}
        self.rng = random.Random(seed)

    def __len__(self) -> int:
        return len(self.sentences)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor, Tensor]:
        item = self.sentences[i]
        words, cases, marks = list(item.words), list(item.cases), list(item.marks)
        if self.join_prob > 0 and self.rng.random() < self.join_prob:
            other = self.sentences[self.rng.randrange(len(self.sentences))]
            words, cases, marks = words + other.words, cases + other.cases, marks + other.marks
        words, cases, marks = words[:self.max_words], cases[:self.max_words], marks[:self.max_words]
        ids = [self.index.get(w, UNKNOWN) for w in words]
        return torch.tensor(ids), torch.tensor(cases), torch.tensor(marks)


def collate(items: list[tuple[Tensor, Tensor, Tensor]]) -> dict[str, Tensor]:
    """Padded batch: ids (B, T) with PAD, cases and marks (B, T) with IGNORE, lengths (B,)."""
    lengths = torch.tensor([len(ids) for ids, _, _ in items])
    width = int(lengths.max())

    def pad(column: int, value: int) -> Tensor:
        out = torch.full((len(items), width), value, dtype=torch.int64)
        for row, item in enumerate(items):
            out[row, :len(item[column])] = item[column]
        return out
    return {"ids": pad(0, PAD), "cases": pad(1, IGNORE), "marks": pad(2, IGNORE), "lengths": lengths}


class RestorerDataModule(L.LightningDataModule):
    def __init__(self, cfg: RestorerDataConfig, vocab: list[str], train: list[Labelled], valid: list[Labelled],
                 seed: int = 0):
        super().__init__()
        self.cfg, self.vocab, self.train_items, self.valid_items, self.seed = cfg, vocab, train, valid, seed

    def train_dataloader(self) -> DataLoader:
        data = RestorerDataset(self.train_items, self.vocab, self.cfg.join_prob, self.cfg.max_words, self.seed)
        return DataLoader(data, batch_size=self.cfg.batch_size, shuffle=True, collate_fn=collate,
                          num_workers=self.cfg.num_workers, generator=torch.Generator().manual_seed(self.seed))

    def val_dataloader(self) -> DataLoader:
        data = RestorerDataset(self.valid_items, self.vocab, 0.0, self.cfg.max_words)
        return DataLoader(data, batch_size=self.cfg.batch_size, shuffle=False, collate_fn=collate,
                          num_workers=self.cfg.num_workers)
