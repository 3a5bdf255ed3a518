"""Do the cached teacher frames carry the words? A linear CTC read-out of them, as a check of the cache.

    python recipes/native/probe_teacher.py --cache data/teacher/base [--manifest M] [--held 300] [--epochs 6]

A single linear layer from the teacher's 40 ms frames to characters is trained with CTC on the manifest's
utterances but the last --held, then read out greedily on those: their CER and WER. With Whisper base's last
block under full context a linear layer reads characters at CER 42 from 20 ms frames (speechocean762 train,
issue 59's probe); a cache that was computed wrongly (shifted, scaled, causal) reads far worse.
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import jiwer
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from asr.corpus.manifest import read_manifest  # noqa: E402
from asr.decoding.ctc import greedy_decode  # noqa: E402
from asr.text.normalize import normalize  # noqa: E402
from asr.text.tokenizer import Tokenizer  # noqa: E402
from asr.training.acoustic.whisper.teacher import TeacherCache  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cache", type=Path, required=True)
    p.add_argument("--manifest", type=Path, default=ROOT.parent / "shared" / "data" / "speechocean762" / "train.jsonl")
    p.add_argument("--held", type=int, default=300, help="the last N utterances are read out, not trained on")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    cache = TeacherCache(a.cache)
    rows = [(torch.from_numpy(cache.load(u.audio)).float(), normalize(u.text)) for u in read_manifest(a.manifest)]
    tokenizer = Tokenizer.train(sorted({text for _, text in rows}), "char", 0)
    train, held = rows[:-a.held], rows[-a.held:]
    head = torch.nn.Linear(train[0][0].shape[1], tokenizer.vocab_size)
    optimizer = torch.optim.AdamW(head.parameters(), lr=3e-3)
    order = list(range(len(train)))
    for epoch in range(a.epochs):
        random.Random(epoch).shuffle(order)
        total = 0.0
        for start in range(0, len(order), 16):
            batch = [train[i] for i in order[start:start + 16]]
            frames = torch.nn.utils.rnn.pad_sequence([f for f, _ in batch], batch_first=True)  # (B, T, D)
            targets = [torch.tensor(tokenizer.encode(t)) for _, t in batch]
            logprobs = head(frames).log_softmax(-1).transpose(0, 1)  # (T, B, V)
            loss = F.ctc_loss(logprobs, torch.cat(targets), torch.tensor([f.shape[0] for f, _ in batch]),
                              torch.tensor([len(t) for t in targets]), zero_infinity=True)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += float(loss)
        print(f"probe: epoch {epoch + 1} loss {total / (len(order) / 16):.3f}", file=sys.stderr, flush=True)
    with torch.no_grad():
        hyps = [tokenizer.decode(greedy_decode(head(f).log_softmax(-1).numpy())) for f, _ in held]
    refs = [t for _, t in held]
    print(f"probe: {len(held)} held-out utterances: CER {100 * jiwer.cer(refs, hyps):.1f}, "
          f"WER {100 * jiwer.wer(refs, hyps):.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
