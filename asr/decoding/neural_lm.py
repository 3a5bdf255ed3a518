"""The second pass's neural word LM at run time, with numpy alone: word sequences -> log p(words, then the end).

    lm = NeuralLM.load("asr/pretrained/default.rescore.safetensors")
    ids = [lm.ids("WHERE ARE YOU GOING".split())]        # 0 is the sentence boundary, 1 <unk>
    lm.sentence_logprobs(ids)                            # array([-21.3]): natural log, the end of sentence included

The network is `asr.training.neural_lm.WordTransformer` (trained by `recipes/lm/neural.py`): adaptive input
embeddings, pre-norm causal Transformer blocks, an adaptive softmax over the same word clusters. It reads each
sentence from the boundary at position 0, as it was trained; a sentence longer than the context is read in
overlapping windows, each word predicted from up to `context - 1` words before it.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from asr.pretrained import read_safetensors, safetensors_metadata

FORMAT = "asr-word-lm-v1"
BOUNDARY, UNK = 0, 1  # the ids of the sentence boundary and of every word outside the vocabulary


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


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


class NeuralLM:
    def __init__(self, weights: dict[str, np.ndarray], config: dict, words: list[str]):
        self.w, self.cfg = weights, config
        self.edges = [0, *config["cutoffs"], config["vocab"]]
        if len(words) != config["vocab"]:
            raise ValueError(f"{len(words)} words for a vocabulary of {config['vocab']}")
        self.words = words
        self.vocabulary = {word: i for i, word in enumerate(words)}

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
    def load(cls, path: str | Path) -> "NeuralLM":
        path = cls.check(path)
        weights, meta = read_safetensors(path, NeuralLMError)
        try:
            return cls(weights, json.loads(meta["config"]), meta["words"].split("\n"))
        except (KeyError, ValueError) as err:
            raise NeuralLMError(f"{path}: not a valid neural word LM file ({err})") from None

    def ids(self, words: list[str]) -> list[int]:
        return [self.vocabulary.get(word, UNK) for word in words]

    def sentence_logprobs(self, sentences: list[list[int]]) -> np.ndarray:
        """(N,) natural-log probabilities of N word-id sequences, each read from the boundary and ended by it.
        An n-best list's sentences share most of their words: each distinct prefix is read once (below)."""
        if not sentences:
            return np.zeros(0)
        if max(len(s) for s in sentences) >= self.cfg["context"]:
            return self._padded(sentences)
        return self._shared(sentences)

    def _shared(self, sentences: list[list[int]]) -> np.ndarray:
        """The sentences' prefix tree read in one pass: each node (a distinct prefix, parents first) at its depth,
        attending to itself and its ancestors only, which is what it would see in its own sentence."""
        node = {(): 0}
        tokens, parents, depths, paths = [BOUNDARY], [-1], [0], []
        for sentence in sentences:
            path = [0]
            for n in range(1, len(sentence) + 1):
                prefix = tuple(sentence[:n])
                if prefix not in node:
                    node[prefix] = len(tokens)
                    tokens.append(sentence[n - 1]), parents.append(path[-1]), depths.append(n)
                path.append(node[prefix])
            paths.append(path)
        sees = np.zeros((len(tokens), len(tokens)), dtype=bool)
        for i, parent in enumerate(parents):
            if parent >= 0:
                sees[i] = sees[parent]
            sees[i, i] = True
        mask = np.where(sees, 0.0, -np.inf).astype(np.float32)
        h = self._hidden(np.array([tokens]), np.array(depths), mask)[0]  # (nodes, D)
        edges: dict[tuple[int, int], int] = {}  # (node, next word) -> row; a sentence's end is BOUNDARY
        for path in paths:
            for k, here in enumerate(path):
                edges.setdefault((here, tokens[path[k + 1]] if k + 1 < len(path) else BOUNDARY), len(edges))
        rows, nexts = (np.array(column) for column in zip(*edges))
        logprob = self._output(h[rows], nexts)
        return np.array([sum(logprob[edges[here, tokens[path[k + 1]] if k + 1 < len(path) else BOUNDARY]]
                             for k, here in enumerate(path)) for path in paths])

    def _padded(self, sentences: list[list[int]]) -> np.ndarray:
        """The sentences side by side, padded, in windows of the context where one is longer."""
        T = max(len(s) for s in sentences) + 1
        x = np.zeros((len(sentences), T), dtype=np.int64)  # BOUNDARY, words, padding (never read: causal)
        y = np.zeros_like(x)  # words, BOUNDARY, padding
        for i, s in enumerate(sentences):
            x[i, 1:len(s) + 1] = s
            y[i, :len(s)] = s
        keep = np.arange(T)[None, :] <= np.array([len(s) for s in sentences])[:, None]
        return (self._logprobs(x, y) * keep).sum(1)

    def _logprobs(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """(B, T) log p(y_t | x_<=t), in windows of the context where T is longer."""
        C, T = self.cfg["context"], x.shape[1]
        if T <= C:
            return self._window(x, y)
        parts, done = [self._window(x[:, :C], y[:, :C])], C
        while done < T:
            end = min(done + C // 2, T)
            parts.append(self._window(x[:, end - C:end], y[:, end - C:end])[:, C - (end - done):])
            done = end
        return np.concatenate(parts, axis=1)

    def _window(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        h = self._hidden(x)  # (B, T, D)
        return self._output(h.reshape(-1, h.shape[-1]), y.reshape(-1)).reshape(y.shape)

    def _embed(self, x: np.ndarray) -> np.ndarray:
        out = np.zeros((*x.shape, self.cfg["dim"]), dtype=np.float32)
        for i, (lo, hi) in enumerate(zip(self.edges, self.edges[1:])):
            inside = (x >= lo) & (x < hi)
            if inside.any():
                vectors = self.w[f"input.emb.{i}.weight"][x[inside] - lo]
                out[inside] = vectors @ self.w[f"input.proj.{i - 1}.weight"].T if i else vectors
        return out

    def _hidden(self, x: np.ndarray, positions: np.ndarray | None = None, mask: np.ndarray | None = None) -> np.ndarray:
        """(B, T) ids -> (B, T, D): at positions 0..T-1 under the causal mask unless given others."""
        w, (B, T), heads = self.w, x.shape, self.cfg["heads"]
        h = self._embed(x) + w["position.weight"][np.arange(T) if positions is None else positions]
        causal = np.triu(np.full((T, T), -np.inf, dtype=np.float32), 1) if mask is None else mask
        for i in range(self.cfg["layers"]):
            p = f"blocks.{i}."
            a = _layer_norm(h, w[p + "norm1.weight"], w[p + "norm1.bias"]) @ w[p + "qkv.weight"].T + w[p + "qkv.bias"]
            q, k, v = a.reshape(B, T, 3, heads, -1).transpose(2, 0, 3, 1, 4)  # each (B, H, T, D/H)
            att = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(q.shape[-1])) + causal
            att = np.exp(att - att.max(-1, keepdims=True))
            att = (att / att.sum(-1, keepdims=True)) @ v  # (B, H, T, D/H)
            h = h + att.transpose(0, 2, 1, 3).reshape(B, T, -1) @ w[p + "out.weight"].T + w[p + "out.bias"]
            m = _layer_norm(h, w[p + "norm2.weight"], w[p + "norm2.bias"]) @ w[p + "up.weight"].T + w[p + "up.bias"]
            h = h + _gelu(m) @ w[p + "down.weight"].T + w[p + "down.bias"]
        return _layer_norm(h, w["norm.weight"], w["norm.bias"])

    def _output(self, h: np.ndarray, y: np.ndarray) -> np.ndarray:
        """(N, D) states and (N,) next words -> (N,) log-probs: the head's for its words, and for a cluster's word
        the head's log-prob of the cluster plus the cluster's own of the word."""
        head = _log_softmax(h @ self.w["output.head.weight"].T + self.w.get("output.head.bias", 0.0))
        shortlist = self.edges[1]
        out = head[np.arange(len(y)), np.minimum(y, shortlist - 1)]
        for i, (lo, hi) in enumerate(zip(self.edges[1:], self.edges[2:])):
            rows = np.nonzero((y >= lo) & (y < hi))[0]
            if len(rows):
                tail = _log_softmax(h[rows] @ self.w[f"output.tail.{i}.0.weight"].T @ self.w[f"output.tail.{i}.1.weight"].T)
                out[rows] = head[rows, shortlist + i] + tail[np.arange(len(rows)), y[rows] - lo]
        return out
