"""The second pass's neural word LM at run time, with numpy alone: word sequences -> log p(words, then the end).

    lm = NeuralLM.load("asr/pretrained/default.rescore.safetensors")
    ids = [lm.ids("WHERE ARE YOU GOING".split())]        # 0 is the sentence boundary, 1 <unk>
    lm.sentence_logprobs(ids)                            # array([-21.3]): natural log, the end of sentence included

The network is `asr.training.lm.neural.WordTransformer` (trained by `recipes/lm/neural.py`): adaptive input
embeddings, pre-norm causal Transformer blocks, an adaptive softmax over the same word clusters. It reads each
sentence from the boundary at position 0, as it was trained; a sentence longer than the context is read in
overlapping windows, each word predicted from up to `context - 1` words before it (`asr.decoding.prefix_tree`,
which also reads an n-best list's shared prefixes once).

Its memory does not grow with the length of what it reads beyond one window of the context: the windows are read
one at a time, a run of nodes attends to the nodes on its own paths alone (not every node to every node), and the
projections, attention and softmax are computed a fixed number of rows and words at a time (`Pieces`; any pieces
give the same scores to float rounding). The weights are a memory map of the file in their stored dtype (float16
for the bundled LM), so the processes of a server share their pages; each is made float32 as it is used.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from asr.decoding.prefix_tree import BOUNDARY, Window, windows  # noqa: F401 (BOUNDARY: the ids' boundary, here too)
from asr.pretrained import read_safetensors, safetensors_metadata

FORMAT = "asr-word-lm-v1"
UNK = 1  # the id of every word outside the vocabulary (BOUNDARY, 0, is the sentence boundary's)


class NeuralLMError(ValueError):
    """A neural LM file that cannot be used; the message names the file and the reason."""


def is_neural_lm(path: str | Path) -> bool:
    """Whether an LM file is a neural word LM (safetensors) rather than an n-gram (ARPA, KenLM's binary)."""
    return str(path).endswith(".safetensors")


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * w + b


def _gelu(x: np.ndarray) -> np.ndarray:  # the tanh form, as trained
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


@dataclass(frozen=True)
class Pieces:
    """How much the reading computes at once: memory, not results (any pieces give the same scores to float
    rounding). At the defaults a window of the bundled LM's holds about 30 MB while it is read where its 64 sentences
    share no word (8,192 nodes, the most one holds), a typical final's n-best (a few hundred nodes) 5-6 MB."""

    rows: int = 64  # nodes whose projections, attention and feed-forward layer are computed at once (at the most)
    keys: int = 65536  # (node, key) pairs that one step of attention weighs (fewer nodes where they need more)
    outputs: int = 128  # (node, next word) pairs whose next-word distributions are computed at once
    columns: int = 4096  # words of a softmax (the head's, a cluster's) weighed at once

    def validate(self) -> "Pieces":
        if min(self.rows, self.keys, self.outputs, self.columns) < 1:
            raise ValueError(f"pieces of at least one row, key, output and column (got {self})")
        return self


class NeuralLM:
    def __init__(self, weights: dict[str, np.ndarray], config: dict, words: np.ndarray, pieces: Pieces = Pieces()):
        """`words`: the vocabulary in id order, UTF-8 (a numpy bytes array: 0.6 MB where a dict of its 32k words
        as strings would be 4 MB)."""
        self.w, self.cfg, self.pieces = weights, config, pieces.validate()
        self.edges = [0, *config["cutoffs"], config["vocab"]]
        if len(words) != config["vocab"]:
            raise ValueError(f"{len(words)} words for a vocabulary of {config['vocab']}")
        self._order = np.argsort(words, kind="stable").astype(np.int32)  # ids in the words' sorted order
        self._sorted = words[self._order]

    @staticmethod
    def metadata(path: str | Path) -> dict[str, str]:
        """A neural word LM file's metadata, its header alone read; NeuralLMError saying why where it is not one."""
        path = Path(path)
        if not path.is_file():
            raise NeuralLMError(f"{path}: no such neural LM file")
        meta = safetensors_metadata(path, NeuralLMError)
        if meta.get("format") != FORMAT:
            raise NeuralLMError(f"{path}: not an asr neural word LM (format {meta.get('format')!r}, expected {FORMAT!r})")
        return meta

    @staticmethod
    def check(path: str | Path) -> Path:
        """`path` where it is a neural word LM file (its header alone read), else NeuralLMError saying why not."""
        NeuralLM.metadata(path)
        return Path(path)

    @staticmethod
    def vocabulary_of(path: str | Path) -> set[str]:
        """The words of a neural word LM file, its header alone read (NeuralLMError where it is not one)."""
        return set(NeuralLM.metadata(path).get("words", "").split("\n"))

    @classmethod
    def load(cls, path: str | Path, pieces: Pieces = Pieces()) -> "NeuralLM":
        """The LM in a file (its weights memory-mapped); NeuralLMError saying why where it cannot be used."""
        path = cls.check(path)
        weights, meta = read_safetensors(path, NeuralLMError, mapped=True)
        try:
            return cls(weights, json.loads(meta["config"]), np.array(meta["words"].encode().split(b"\n")), pieces)
        except (KeyError, ValueError) as err:
            raise NeuralLMError(f"{path}: not a valid neural word LM file ({err})") from None

    def id_of(self, word: str) -> int:
        """The word's id, UNK where the vocabulary lacks it."""
        key = word.encode()
        at = int(np.searchsorted(self._sorted, key))
        return int(self._order[at]) if at < len(self._sorted) and self._sorted[at] == key else UNK

    def ids(self, words: list[str]) -> list[int]:
        return [self.id_of(word) for word in words]

    def sentence_logprobs(self, sentences: list[list[int]], before: list[int] | tuple[int, ...] = ()) -> np.ndarray:
        """(N,) natural-log probabilities of N word-id sequences, each read from the boundary and the words `before`
        it (not scored) and ended by the boundary (`word_and_end_logprobs`, summed)."""
        words, ends = self.word_and_end_logprobs(sentences, before)
        return words + ends

    def word_and_end_logprobs(self, sentences: list[list[int]],
                              before: list[int] | tuple[int, ...] = ()) -> tuple[np.ndarray, np.ndarray]:
        """(N,) natural-log probabilities of N word-id sequences' words, each read from the boundary and the words
        `before` it (not scored), and (N,) of the sentence's end after them: window by window
        (`asr.decoding.prefix_tree`), each distinct prefix once."""
        words, ends = np.zeros(len(sentences)), np.zeros(len(sentences))
        if sentences:
            for window in windows(sentences, self.cfg["context"], before):
                logprob = self._output(self._states(window), window.edge_nodes, window.edge_nexts)[window.uses]
                np.add.at(words, window.owners[~window.ending], logprob[~window.ending].astype(np.float64))
                np.add.at(ends, window.owners[window.ending], logprob[window.ending].astype(np.float64))
        return words, ends

    def _f32(self, name: str) -> np.ndarray:
        """Weight `name` as float32 (a copy where it is stored narrower)."""
        weight = self.w[name]
        return weight if weight.dtype == np.float32 else weight.astype(np.float32)

    def _embed(self, x: np.ndarray) -> np.ndarray:
        out = np.zeros((*x.shape, self.cfg["dim"]), dtype=np.float32)
        for i, (lo, hi) in enumerate(zip(self.edges, self.edges[1:])):
            inside = (x >= lo) & (x < hi)
            if inside.any():
                vectors = self.w[f"input.emb.{i}.weight"][x[inside] - lo].astype(np.float32)
                out[inside] = vectors @ self._f32(f"input.proj.{i - 1}.weight").T if i else vectors
        return out

    def _states(self, window: Window) -> np.ndarray:
        """(nodes, D): the last layer's output at each node of the window's tree, each attending to itself and
        its ancestors; every step a fixed number of nodes (`Pieces`), the activations updated in place."""
        n, dim, heads = len(window.tokens), self.cfg["dim"], self.cfg["heads"]
        h = self._embed(window.tokens)
        h += self.w["position.weight"][window.positions]
        rows = [slice(i, i + self.pieces.rows) for i in range(0, n, self.pieces.rows)]
        blocks = list(self._attention_blocks(window))
        scale = np.float32(np.sqrt(dim // heads))
        for i in range(self.cfg["layers"]):  # each weight made float32 where it is used, then let go
            w = lambda name: self._f32(f"blocks.{i}.{name}")  # noqa: E731
            norm, bias, weight, shift = w("norm1.weight"), w("norm1.bias"), w("qkv.weight"), w("qkv.bias")
            kv = np.empty((n, 2 * dim), dtype=np.float32)  # every node's key and value
            for r in rows:
                kv[r] = _layer_norm(h[r], norm, bias) @ weight[dim:].T + shift[dim:]
            kv = kv.reshape(n, 2, heads, dim // heads)
            out, out_shift = w("out.weight"), w("out.bias")
            for r, keys, seen in blocks:  # the block's nodes, the nodes they attend to, which sees which
                q = (_layer_norm(h[r], norm, bias) @ weight[:dim].T + shift[:dim]).reshape(-1, heads, dim // heads)
                k, v = kv[keys, 0].transpose(1, 2, 0), kv[keys, 1].transpose(1, 0, 2)  # (H, D/H, K), (H, K, D/H)
                att = np.where(seen, q.transpose(1, 0, 2) @ k / scale, -np.inf)  # (H, B, K)
                att = np.exp(att - att.max(-1, keepdims=True))
                mixed = (att / att.sum(-1, keepdims=True)) @ v  # (H, B, D/H)
                h[r] += mixed.transpose(1, 0, 2).reshape(-1, dim) @ out.T + out_shift
            del kv, weight, out
            norm, bias, up, up_shift, down, shift = (w(name) for name in ("norm2.weight", "norm2.bias", "up.weight",
                                                                          "up.bias", "down.weight", "down.bias"))
            for r in rows:
                h[r] += _gelu(_layer_norm(h[r], norm, bias) @ up.T + up_shift) @ down.T + shift
            del up, down
        norm, bias = self._f32("norm.weight"), self._f32("norm.bias")
        for r in rows:
            h[r] = _layer_norm(h[r], norm, bias)
        return h

    def _attention_blocks(self, window: Window) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
        """The window's nodes in runs (slice) that attend together: with the nodes any of them attends to (K,
        ascending: their ancestors and themselves) and (B, K) which node sees which; a run halved until B x K is
        within `Pieces.keys`. Nodes made one after another lie on few paths, so K stays near B + the context."""
        n, start, size = len(window.tokens), 0, self.pieces.rows
        while start < n:
            nodes = np.arange(start, min(start + size, n))
            ancestors = window.ancestors(nodes)  # (B, L), -1 past the root
            keys = np.unique(ancestors[ancestors >= 0])
            if len(nodes) * len(keys) > self.pieces.keys and size > 1:
                size //= 2
                continue
            seen = np.zeros((len(nodes), len(keys)), dtype=bool)
            row, column = np.nonzero(ancestors >= 0)
            seen[row, np.searchsorted(keys, ancestors[row, column])] = True
            yield slice(start, start + len(nodes)), keys, seen
            start, size = start + len(nodes), self.pieces.rows

    def _output(self, h: np.ndarray, nodes: np.ndarray, y: np.ndarray) -> np.ndarray:
        """(nodes, D) states, and (E,) nodes with the (E,) next words wanted after them -> (E,) log-probs: the
        head's for its words, and for a cluster's word the head's log-prob of the cluster plus the cluster's own
        of the word; `Pieces.outputs` rows at a time."""
        edges, out = self.edges, np.empty(len(y), dtype=np.float32)
        which = np.searchsorted(edges, y, side="right") - 1  # 0: a word of the head's, i + 1: of cluster i
        head_picks = np.where(which == 0, y, edges[1] + which - 1)  # a cluster's word: the cluster's own entry
        for start in range(0, len(y), self.pieces.outputs):
            piece = slice(start, start + self.pieces.outputs)
            states, words, clusters = h[nodes[piece]], y[piece], which[piece]
            got = self._picked(states, "output.head.weight", head_picks[piece], self.w.get("output.head.bias"))
            for i, lo in enumerate(edges[1:-1]):
                rows = np.nonzero(clusters == i + 1)[0]
                if len(rows):
                    small = states[rows] @ self._f32(f"output.tail.{i}.0.weight").T
                    got[rows] += self._picked(small, f"output.tail.{i}.1.weight", words[rows] - lo)
            out[piece] = got
        return out

    def _picked(self, x: np.ndarray, name: str, picks: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
        """(R, d) inputs -> (R,) log_softmax(x @ W.T + bias)[r, picks[r]] for the weight W (V, d) called `name`,
        `Pieces.columns` of its V outputs at a time (float32 copies of those alone), the normaliser summed as
        they go."""
        weight, columns = self.w[name], self.pieces.columns
        peak = np.full(len(x), -np.inf, dtype=np.float32)
        total, picked = np.zeros(len(x), dtype=np.float32), np.empty(len(x), dtype=np.float32)
        for start in range(0, len(weight), columns):
            z = x @ np.asarray(weight[start:start + columns], dtype=np.float32).T
            if bias is not None:
                z += bias[start:start + columns]
            inside = np.nonzero((picks >= start) & (picks < start + columns))[0]
            picked[inside] = z[inside, picks[inside] - start]
            top = np.maximum(peak, z.max(1))
            total = total * np.exp(peak - top) + np.exp(z - top[:, None]).sum(1)
            peak = top
        return picked - peak - np.log(total)
