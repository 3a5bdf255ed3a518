"""The second pass's neural word LM: a small causal Transformer over words, trained on the LM's text.

    model = WordTransformer(NeuralLMConfig(vocab=len(words)))
    logprob = model(x, y)                 # (B, T) log p(y_t | x_<=t), natural log

Words are ids of a fixed word list (`recipes/lm/neural.py`'s stage 2: 0 is the sentence boundary, 1 <unk>, then
words by falling frequency). Frequent words get wide embeddings and rare ones narrow (adaptive input, Baevski &
Auli 2019) and the output is an adaptive softmax (Grave et al. 2017) over the same clusters, so the output costs
about half a million multiply-adds a word where a plain 32k-word softmax would cost 8.4 million. Training reads
windows that start at a sentence boundary, so position 0 is always the boundary, as when a hypothesis is scored.

The run-time twin, numpy alone, is `asr.decoding.neural_lm.NeuralLM`; `export` writes what it reads (a test holds
the two to the same scores). Trained by `recipes/lm/neural.py`.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from asr.decoding.neural_lm import BOUNDARY, FORMAT, UNK
from asr.training.hardware import cpu_has_bf16


@dataclass(frozen=True)
class NeuralLMConfig:
    vocab: int = 32768  # ids, the boundary and <unk> included
    cutoffs: tuple[int, ...] = (2048, 16384)  # cluster edges: ids below 2048 are the head's
    div: int = 4  # each cluster's width is the previous one's / div (256, 64, 16)
    dim: int = 256
    layers: int = 4
    heads: int = 4
    context: int = 128  # positions a window holds (and the longest sentence scored in one piece)
    dropout: float = 0.0  # a run sees its text about once: nothing to regularise
    mlp: int = 4  # the feed-forward's width, times dim

    @property
    def edges(self) -> list[int]:
        return [0, *self.cutoffs, self.vocab]

    def width(self, cluster: int) -> int:
        return self.dim // self.div ** cluster


class AdaptiveInput(nn.Module):
    """Word ids (B, T) -> (B, T, dim): cluster i's words are embedded at width dim / div^i and projected up."""

    def __init__(self, cfg: NeuralLMConfig):
        super().__init__()
        self.edges = cfg.edges
        self.emb = nn.ModuleList(nn.Embedding(hi - lo, cfg.width(i)) for i, (lo, hi) in
                                 enumerate(zip(self.edges, self.edges[1:])))
        self.proj = nn.ModuleList(nn.Linear(cfg.width(i), cfg.dim, bias=False) for i in range(1, len(self.emb)))
        for emb in self.emb:
            nn.init.normal_(emb.weight, std=0.02)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out = None
        for i, (lo, hi) in enumerate(zip(self.edges, self.edges[1:])):
            inside = (ids >= lo) & (ids < hi)
            vectors = self.emb[i]((ids - lo).clamp(0, hi - lo - 1))  # (B, T, width_i)
            if i:
                vectors = self.proj[i - 1](vectors)
            vectors = vectors * inside.unsqueeze(-1).to(vectors.dtype)
            out = vectors if out is None else out + vectors
        return out


class AdaptiveOutput(nn.Module):
    """(N, dim) states and (N,) next words -> (N,) log-probs: a softmax over the head's words and one entry a
    cluster; a cluster's word adds the cluster's own softmax, from a state projected to its width. The matrices run
    under autocast (bf16), each softmax in float32."""

    def __init__(self, cfg: NeuralLMConfig):
        super().__init__()
        self.edges = cfg.edges
        clusters = len(self.edges) - 2
        self.head = nn.Linear(cfg.dim, self.edges[1] + clusters, bias=False)
        self.tail = nn.ModuleList(nn.Sequential(nn.Linear(cfg.dim, cfg.width(i + 1), bias=False),
                                                nn.Linear(cfg.width(i + 1), hi - lo, bias=False))
                                  for i, (lo, hi) in enumerate(zip(self.edges[1:], self.edges[2:])))

    def forward(self, h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        shortlist = self.edges[1]
        head = F.log_softmax(self.head(h).float(), dim=-1)  # (N, shortlist + clusters)
        out = head.gather(1, y.clamp(max=shortlist - 1)[:, None]).squeeze(1)
        for i, (lo, hi) in enumerate(zip(self.edges[1:], self.edges[2:])):
            rows = torch.nonzero((y >= lo) & (y < hi)).squeeze(1)
            if len(rows):
                tail = F.log_softmax(self.tail[i](h[rows]).float(), dim=-1)
                out = out.index_put((rows,), head[rows, shortlist + i] + tail.gather(1, (y[rows] - lo)[:, None]).squeeze(1))
        return out


class Block(nn.Module):
    """Pre-norm self-attention (causal) and feed-forward, each added to the residual."""

    def __init__(self, cfg: NeuralLMConfig):
        super().__init__()
        self.heads, self.dropout = cfg.heads, cfg.dropout
        self.norm1, self.norm2 = nn.LayerNorm(cfg.dim), nn.LayerNorm(cfg.dim)
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim)
        self.out = nn.Linear(cfg.dim, cfg.dim)
        self.up, self.down = nn.Linear(cfg.dim, cfg.mlp * cfg.dim), nn.Linear(cfg.mlp * cfg.dim, cfg.dim)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(B, T, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                             dropout_p=self.dropout if self.training else 0.0)  # (B, H, T, D/H)
        x = x + self.drop(self.out(att.transpose(1, 2).reshape(B, T, D)))
        return x + self.drop(self.down(F.gelu(approximate="tanh", input=self.up(self.norm2(x)))))


class WordTransformer(nn.Module):
    def __init__(self, cfg: NeuralLMConfig):
        super().__init__()
        self.cfg = cfg
        self.input = AdaptiveInput(cfg)
        self.position = nn.Embedding(cfg.context, cfg.dim)
        nn.init.normal_(self.position.weight, std=0.02)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = nn.LayerNorm(cfg.dim)
        self.output = AdaptiveOutput(cfg)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T) ids -> (B, T, dim), the state each next word is predicted from."""
        h = self.drop(self.input(x) + self.position.weight[: x.shape[1]])
        for block in self.blocks:
            h = block(h)
        return self.norm(h)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """(B, T) inputs and next words -> (B, T) log-probabilities of the next words."""
        h = self.hidden(x)
        return self.output(h.reshape(-1, h.shape[-1]), y.reshape(-1)).view(y.shape)


def _save_half(model: WordTransformer, path: Path, metadata: dict[str, str] | None = None) -> None:
    """The weights in float16 to a safetensors file, written under a temporary name first."""
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    save_file({k: v.detach().to(torch.float16).contiguous() for k, v in model.state_dict().items()}, str(partial),
              metadata=metadata)
    partial.replace(path)


def export(model: WordTransformer, words: list[str], path: Path) -> None:
    """The weights in float16 with the config and word list, for `asr.decoding.neural_lm.NeuralLM`."""
    _save_half(model, path, {"format": FORMAT, "config": json.dumps(asdict(model.cfg)), "words": "\n".join(words)})


@dataclass
class Schedule:
    """Linear warm-up to `lr`, then a cosine to `lr * floor` at `steps`."""

    lr: float = 1e-3
    warmup: int = 300
    steps: int = 12000
    floor: float = 0.1

    def at(self, step: int) -> float:
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        done = min(1.0, (step - self.warmup) / max(1, self.steps - self.warmup))
        return self.lr * (self.floor + (1 - self.floor) * 0.5 * (1 + math.cos(math.pi * done)))


def _windows(ids: np.ndarray, starts: list[np.ndarray], shares: list[float], rng: np.random.Generator, batch: int,
             context: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`batch` windows of `context` ids that begin at a sentence boundary, each drawn from one of the texts whose
    `starts` are given with the texts' `shares`, and the ids one later."""
    texts = rng.choice(len(starts), batch, p=shares)
    rows = np.stack([ids[s:s + context + 1] for s in (rng.choice(starts[t]) for t in texts)]).astype(np.int64)
    rows = torch.from_numpy(rows)
    return rows[:, :-1], rows[:, 1:]


def perplexity(model: WordTransformer, sentences: list[list[int]]) -> float:
    """exp of the mean negative log-prob a word (each sentence's end counted as one), sentences read one at a time
    from the boundary as the second pass reads them."""
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for s in sentences:
            s = s[: model.cfg.context - 1]
            total -= model(torch.tensor([[BOUNDARY, *s]]), torch.tensor([[*s, BOUNDARY]])).sum().item()
            count += len(s) + 1
    model.train()
    return math.exp(total / max(1, count))


def load_state(folder: Path) -> tuple[WordTransformer, dict] | None:
    """The model and its run's record (step, schedule) from a state folder, or None where it holds none."""
    from safetensors.torch import load_file

    if not (folder / "state.json").is_file():
        return None
    record = json.loads((folder / "state.json").read_text())
    cfg = NeuralLMConfig(**{**record["config"], "cutoffs": tuple(record["config"]["cutoffs"])})
    model = WordTransformer(cfg)
    model.load_state_dict({k: v.float() for k, v in load_file(str(folder / "weights.safetensors")).items()})
    return model, record


def save_state(model: WordTransformer, record: dict, folder: Path) -> None:
    """Weights in float16 (13.3 MB for the default shape: what git carries between working periods) and the record."""
    _save_half(model, folder / "weights.safetensors")
    (folder / "state.json").write_text(json.dumps(record, indent=1) + "\n")


def train(ids: np.ndarray, words: list[str], state: Path, minutes: float, save_minutes: float, steps: int | None,
          batch: int, threads: int, config: dict, dev: dict[str, list[str]], log,
          in_domain: tuple[int, float] | None = None) -> WordTransformer:
    """Train from `state` (or anew) on windows of `ids` for `minutes` or to the schedule's end, saving to `state`
    every `save_minutes` and at the end, with the dev sets' perplexity in `state/log.jsonl`. `steps`: a new run's
    schedule length (None: `Schedule`'s), or a resumed run's new one. `in_domain`: where the in-domain text starts in
    `ids` and the share of windows drawn from it (else every sentence alike). The optimizer's moments are not
    carried: a resumed run warms them up again over `Schedule.warmup` steps. bf16 autocast where the CPU has bf16."""
    torch.set_num_threads(threads)
    loaded = load_state(state)
    if loaded is None:
        torch.manual_seed(0)
        model = WordTransformer(NeuralLMConfig(vocab=len(words), **config))
        schedule = Schedule(steps=steps) if steps else Schedule()
        record = {"config": asdict(model.cfg), "step": 0, "schedule": asdict(schedule), "words": len(words)}
    else:
        model, record = loaded
        if record["words"] != len(words):
            raise ValueError(f"{state}: trained on {record['words']} words, the vocabulary has {len(words)}")
        if steps:
            record["schedule"]["steps"] = steps
    schedule, cfg = Schedule(**record["schedule"]), model.cfg
    index = {w: i for i, w in enumerate(words)}
    dev_ids = {name: [[index.get(w, UNK) for w in s.split()] for s in text] for name, text in dev.items()}
    starts = np.nonzero(np.asarray(ids[: len(ids) - cfg.context - 1]) == 0)[0]
    split, share = in_domain if in_domain else (len(ids), 0.0)
    if share > 0:
        record["in_domain_share"] = share
    texts = [starts[starts < split], starts[starts >= split]]
    starts, shares = ([texts[0], texts[1]], [1 - share, share]) if share > 0 and len(texts[1]) else ([starts], [1.0])
    rng = np.random.default_rng(record["step"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=schedule.at(record["step"]), weight_decay=0.01,
                                  betas=(0.9, 0.98))
    bf16 = cpu_has_bf16()
    log(f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters, step {record['step']}, "
        f"{sum(map(len, starts))} sentences, in-domain share {share:g}, bf16 {bf16}")
    first = record["step"]
    end, saved, losses = time.time() + 60 * minutes, time.time(), []

    def save() -> None:
        row = {"step": record["step"], "train_loss": round(float(np.mean(losses[-200:])), 4),
               **{f"{name} ppl": round(perplexity(model, s), 1) for name, s in dev_ids.items()},
               "time": time.strftime("%Y-%m-%d %H:%M")}
        save_state(model, record, state)
        with open(state / "log.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        log(json.dumps(row))

    model.train()
    while time.time() < end and record["step"] < schedule.steps:
        step = record["step"]
        rewarm = min(1.0, (step - first + 1) / schedule.warmup) if first else 1.0  # Adam's moments start anew
        for group in optimizer.param_groups:
            group["lr"] = lr = schedule.at(step) * rewarm
        x, y = _windows(ids, starts, shares, rng, batch, cfg.context)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = -model(x, y).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        record["step"] = step + 1
        if record["step"] % 100 == 0:
            log(f"step {record['step']} loss {np.mean(losses[-100:]):.3f} lr {lr:.2e}")
        if time.time() - saved > 60 * save_minutes:
            save()
            saved = time.time()
    if record["step"] > first:
        save()
    return model.eval()
