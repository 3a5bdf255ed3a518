"""Train the G2P (letters -> phones) on a lexicon and score it on held-out words.

    python -m asr.training.g2p --lexicon data/lexicon/cmudict.txt --out runs/g2p --epochs 12 --threads 1

Held out: every word whose CRC-32 puts it in the test share (`--test-percent`, 3 by default), with all its
pronunciations; training never sees them. The network (`G2PNet`) embeds the letters, runs a bidirectional LSTM
over them and gives each letter `frames` CTC frames over blank + 39 phones; CTC trains it against every
pronunciation of every training word. Written to `OUT/g2p.safetensors` (float16 weights, config and alphabets;
read by `asr.text.g2p` with numpy alone) and `OUT/metrics.json`: the phone error rate (edit distance to the
nearest pronunciation, over its length) and the word error rate (no pronunciation matched) on the held-out words,
both scored by the numpy runtime from the written file.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import Tensor, nn

from asr.text.g2p import FORMAT, G2P, load_g2p
from asr.text.lexicon import PHONES, Lexicon

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ'"


@dataclass
class G2PConfig:
    dim: int = 64  # letter embedding size
    hidden: int = 160  # LSTM units per direction
    layers: int = 2
    frames: int = 3  # CTC frames per letter ("X" is three phones: EH K S)
    dropout: float = 0.2


class G2PNet(nn.Module):
    def __init__(self, cfg: G2PConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(len(LETTERS) + 1, cfg.dim, padding_idx=0)
        self.rnn = nn.LSTM(cfg.dim, cfg.hidden, cfg.layers, batch_first=True, bidirectional=True,
                           dropout=cfg.dropout if cfg.layers > 1 else 0.0)
        self.drop = nn.Dropout(cfg.dropout)
        self.out = nn.Linear(2 * cfg.hidden, cfg.frames * (len(PHONES) + 1))

    def forward(self, ids: Tensor, lengths: Tensor) -> Tensor:
        """ids (B, L) letter ids (0 pads), lengths (B,) -> CTC log-probs (B, L * frames, 40)."""
        x = self.drop(self.embed(ids))
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        h, _ = nn.utils.rnn.pad_packed_sequence(self.rnn(packed)[0], batch_first=True, total_length=ids.shape[1])
        y = self.out(self.drop(h))  # (B, L, frames * 40)
        return y.reshape(ids.shape[0], -1, len(PHONES) + 1).log_softmax(-1)


def held_out(word: str, percent: float) -> bool:
    return zlib.crc32(word.encode()) % 1000 < percent * 10


def split(lexicon: Lexicon, percent: float) -> tuple[list[tuple[str, tuple[str, ...]]], dict[str, list[tuple[str, ...]]]]:
    """(training pairs (word, pronunciation), held-out words with all their pronunciations)."""
    train, test = [], {}
    for word, prons in lexicon.items():
        if held_out(word, percent):
            test[word] = prons
        elif all(ch in LETTERS for ch in word):
            train.extend((word, pron) for pron in prons)
    return train, test


def batches(pairs: list, size: int, rng: random.Random):
    """Shuffled batches of words of similar length (little padding): (ids, lengths, targets, target lengths)."""
    order = sorted(range(len(pairs)), key=lambda i: (len(pairs[i][0]), rng.random()))
    groups = [order[i:i + size] for i in range(0, len(order), size)]
    rng.shuffle(groups)
    phone_id = {p: i + 1 for i, p in enumerate(PHONES)}
    for group in groups:
        words = [pairs[i][0] for i in group]
        prons = [pairs[i][1] for i in group]
        ids = torch.zeros(len(words), max(map(len, words)), dtype=torch.long)
        for row, word in enumerate(words):
            ids[row, :len(word)] = torch.tensor([LETTERS.index(ch) + 1 for ch in word])
        targets = torch.tensor([phone_id[p] for pron in prons for p in pron])
        yield ids, torch.tensor([len(w) for w in words]), targets, torch.tensor([len(p) for p in prons])


def save_g2p(path: Path, net: G2PNet, info: dict) -> Path:
    tensors = {k: v.detach().to(torch.float16).contiguous() for k, v in net.state_dict().items()}
    save_file(tensors, str(path), metadata={"format": FORMAT, "config": json.dumps(asdict(net.cfg)), "letters": LETTERS,
                                            "phones": json.dumps(PHONES), "info": json.dumps(info)})
    return path


def edit_distance(a: list[str], b: list[str] | tuple[str, ...]) -> int:
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, start=1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1]


def score(g2p: G2P, test: dict[str, list[tuple[str, ...]]], batch: int = 256) -> dict:
    """Phone and word error rates (%) of `g2p` on held-out words, against each word's nearest pronunciation."""
    words = sorted(test)
    errors = phones = wrong = 0
    start = time.perf_counter()
    for i in range(0, len(words), batch):
        chunk = words[i:i + batch]
        for word, hyp in zip(chunk, g2p.phones_batch(chunk)):
            dist, ref = min((edit_distance(hyp, ref), ref) for ref in test[word])
            errors, phones, wrong = errors + dist, phones + len(ref), wrong + (dist > 0)
    seconds = time.perf_counter() - start
    return {"words": len(words), "per": round(100 * errors / max(phones, 1), 2),
            "wer": round(100 * wrong / max(len(words), 1), 2), "ms_per_word": round(1000 * seconds / max(len(words), 1), 3)}


def train(lexicon: Lexicon, out: Path, cfg: G2PConfig, epochs: int, batch_size: int = 128, lr: float = 3e-3,
          test_percent: float = 3.0, seed: int = 0, log=print) -> dict:
    torch.manual_seed(seed)
    rng = random.Random(seed)
    pairs, test = split(lexicon, test_percent)
    net = G2PNet(cfg)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-4)
    steps = epochs * math.ceil(len(pairs) / batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(steps, 1), pct_start=0.05)
    log(f"{len(pairs)} training pronunciations, {len(test)} held-out words, "
        f"{sum(p.numel() for p in net.parameters())} parameters, {steps} steps")
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    for epoch in range(epochs):
        net.train()
        total = count = 0
        for ids, lengths, targets, target_lengths in batches(pairs, batch_size, rng):
            logp = net(ids, lengths)  # (B, T, 40)
            loss = F.ctc_loss(logp.transpose(0, 1), targets, lengths * cfg.frames, target_lengths,
                              zero_infinity=True)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 5.0)
            opt.step()
            sched.step()
            total, count = total + loss.item(), count + 1
        net.eval()
        info = {"epoch": epoch + 1, "train_loss": round(total / max(count, 1), 4),
                "minutes": round((time.perf_counter() - start) / 60, 2)}
        path = save_g2p(out / "g2p.safetensors", net, info)
        sample = dict(list(test.items())[:2000])
        log(json.dumps({**info, **{f"sample_{k}": v for k, v in score(load_g2p(path), sample).items()}}))
    metrics = {**info, "config": asdict(cfg), "test_percent": test_percent,
               "held_out": score(load_g2p(out / "g2p.safetensors"), test),
               "bytes": (out / "g2p.safetensors").stat().st_size}
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    return metrics


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m asr.training.g2p", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lexicon", required=True, help="a lexicon file (python -m asr.training.g2p.lexicon)")
    parser.add_argument("--out", required=True, help="folder for g2p.safetensors and metrics.json")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--hidden", type=int, default=G2PConfig.hidden)
    parser.add_argument("--layers", type=int, default=G2PConfig.layers)
    parser.add_argument("--test-percent", type=float, default=3.0, help="share of words held out for scoring")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from asr.text.lexicon import LexiconError
    try:
        lexicon = Lexicon.load(args.lexicon)
    except LexiconError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    metrics = train(lexicon, Path(args.out), G2PConfig(hidden=args.hidden, layers=args.layers), args.epochs,
                    args.batch_size, args.lr, args.test_percent, args.seed, log=lambda s: print(s, flush=True))
    print(json.dumps(metrics["held_out"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
