"""Letters -> phones for words outside the lexicon, run with numpy alone (no torch, no onnxruntime).

    g2p = load_g2p()                      # the bundled one (asr/pretrained/g2p.safetensors), or load_g2p(path)
    g2p.phones("KATHLEEN")                # ['K', 'AE', 'TH', 'L', 'IY', 'N']
    g2p.phones_batch(["ZORBLAX", "QUUX"]) # many words at once, faster

The network (`asr.training.g2p` trains it on CMUdict): letter embeddings, a bidirectional LSTM over the
letters, and a linear layer that gives every letter `frames` CTC frames over the 39 phones and a blank;
greedy CTC decoding reads the phones off them. The weights, config and alphabets are one safetensors file,
read here by a small reader of the format (the `safetensors` package is not needed at run time).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from asr.pretrained import bundled, file_or_bundled, read_safetensors

FORMAT = "asr-g2p-v1"
FILE = "g2p.safetensors"


class G2PError(ValueError):
    """A G2P file that cannot be used; the message names the file and the reason."""


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * x) + 1.0)


class G2P:
    """A trained letters -> phones network; `letters` and `phones` are its input and output alphabets."""

    def __init__(self, weights: dict[str, np.ndarray], config: dict, letters: str, phones: list[str]):
        self.w = {name: w for name, w in weights.items() if not name.startswith("rnn.")}  # the LSTM's: below
        self.cfg, self.phone_names = config, phones
        self.letter_ids = {ch: i + 1 for i, ch in enumerate(letters)}  # 0 pads (and stands for unknown letters)
        self.rnn = {}  # (layer, reverse) -> (W_ih^T (D, 4H), W_hh^T (H, 4H), bias (4H,)), contiguous for the matmuls
        for layer in range(config["layers"]):
            for reverse in (False, True):
                suffix = f"l{layer}" + ("_reverse" if reverse else "")
                self.rnn[layer, reverse] = (
                    np.ascontiguousarray(weights[f"rnn.weight_ih_{suffix}"].T),
                    np.ascontiguousarray(weights[f"rnn.weight_hh_{suffix}"].T),
                    weights[f"rnn.bias_ih_{suffix}"] + weights[f"rnn.bias_hh_{suffix}"])

    def _lstm(self, x: np.ndarray, mask: np.ndarray | None, layer: int, reverse: bool) -> np.ndarray:
        """x (B, L, D), mask (B, L) or None (no padding) -> (B, L, H): one direction of one layer, PyTorch's gate
        order (i, f, g, o). Padding never reaches a real letter: the forward pass meets it after each word's
        end, and the reverse pass keeps its state at zero through it (the mask)."""
        w_ih, w_hh, bias = self.rnn[layer, reverse]
        batch, length, _ = x.shape
        hidden = w_hh.shape[0]
        inputs = x @ w_ih + bias  # (B, L, 4H)
        h = np.zeros((batch, hidden), np.float32)
        c = np.zeros((batch, hidden), np.float32)
        out = np.empty((batch, length, hidden), np.float32)
        for t in (range(length - 1, -1, -1) if reverse else range(length)):
            gates = inputs[:, t] + h @ w_hh
            sig = _sigmoid(gates)
            c_new = sig[:, hidden:2 * hidden] * c + sig[:, :hidden] * np.tanh(gates[:, 2 * hidden:3 * hidden])
            h_new = sig[:, 3 * hidden:] * np.tanh(c_new)
            if reverse and mask is not None:
                keep = mask[:, t:t + 1]
                c_new, h_new = np.where(keep, c_new, c), np.where(keep, h_new, h)
            c, h = c_new, h_new
            out[:, t] = h
        return out

    def logits(self, words: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Normalised words -> (CTC logits (B, L * frames, V), frame lengths (B,)); unit 0 is the blank."""
        length = max(len(w) for w in words)
        ids = np.zeros((len(words), length), np.int64)
        for row, word in enumerate(words):
            ids[row, :len(word)] = [self.letter_ids.get(ch, 0) for ch in word]
        lengths = np.array([len(w) for w in words])
        mask = np.arange(length)[None, :] < lengths[:, None]
        padded = None if (lengths == length).all() else mask
        x = self.w["embed.weight"][ids]
        for layer in range(self.cfg["layers"]):
            x = np.concatenate([self._lstm(x, padded, layer, False), self._lstm(x, padded, layer, True)], axis=-1)
        frames = self.cfg["frames"]
        y = x @ self.w["out.weight"].T + self.w["out.bias"]  # (B, L, frames * V)
        y = y.reshape(len(words), length * frames, -1)
        return y, lengths * frames

    def phones_batch(self, words: list[str]) -> list[list[str]]:
        """Each normalised word's phones (greedy CTC); [] for an empty word."""
        todo = [w for w in words if w]
        if not todo:
            return [[] for _ in words]
        logits, lengths = self.logits(todo)
        best = logits.argmax(-1)
        results = iter([self._collapse(row[:n]) for row, n in zip(best, lengths)])
        return [next(results) if w else [] for w in words]

    def phones(self, word: str) -> list[str]:
        return self.phones_batch([word])[0]

    def _collapse(self, path: np.ndarray) -> list[str]:
        units = [int(u) for i, u in enumerate(path) if u != 0 and (i == 0 or u != path[i - 1])]
        return [self.phone_names[u - 1] for u in units]


def bundled_g2p() -> G2P | None:
    """The G2P shipped in the package, or None where this installation has none."""
    path = bundled(FILE)
    return load_g2p(path) if path else None


def load_g2p(path: str | Path | None = None) -> G2P:
    """The G2P at `path` (None: the bundled one); G2PError naming the file where it cannot be used."""
    path = file_or_bundled(path, FILE, G2PError, "G2P")
    weights, meta = read_safetensors(path, G2PError)
    if meta.get("format") != FORMAT:
        raise G2PError(f"{path}: not an asr G2P (format {meta.get('format')!r}, expected {FORMAT!r})")
    try:
        return G2P(weights, json.loads(meta["config"]), meta["letters"], json.loads(meta["phones"]))
    except (KeyError, ValueError) as err:
        raise G2PError(f"{path}: not a valid asr G2P file ({err})") from None
