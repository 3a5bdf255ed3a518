"""Casing and punctuation for finals: plain upper-case words in, text people read out.

    restorer = load_restorer("onnx")          # the bundled model (torch: restorer.safetensors)
    restorer.restore("WHERE ARE YOU GOING")   # "Where are you going?"
    restorer.restore(final_text, pauses)      # with the seconds before each word (from the word times)

Either backend runs the same network (`asr.text.restore.model`): torch from the safetensors file, or
onnxruntime from its ONNX export (no torch). The output has one token per input word (the word in its
case, with its mark attached), so word timestamps still line up with it. A restorer trained with pauses
(format v2) also reads the pause before each word where it is given; one without (v1) ignores them.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from asr.model.errors import installed, needs_train_extra
from asr.pretrained import bundled, file_or_bundled
from asr.text.restore.format import FORMATS, UNKNOWN, RestorerError
from asr.text.restore.labels import pause_ids, render

FILES = {"torch": "restorer.safetensors", "onnx": "restorer.onnx"}


Run = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


class Restorer:
    """A vocabulary and a network run: word ids and pause ids (1, T) -> case logits (1, T, 3), mark logits
    (1, T, 5). `uses_pauses`: the network reads pauses (otherwise its run ignores them)."""

    def __init__(self, vocab: list[str], run: Run, backend: str, path: Path, uses_pauses: bool = False):
        self.index = {word: i for i, word in enumerate(vocab)}
        self.run, self.backend, self.path, self.uses_pauses = run, backend, path, uses_pauses

    def labels(self, words: list[str], pauses: Sequence[float] | None = None) -> tuple[list[int], list[int]]:
        """Each word's case class and following mark (asr.text.restore.labels.CASES / MARKS ids); `pauses`: the
        seconds before each word (the first is not used), None where unknown."""
        if not words:
            return [], []
        ids = np.array([[self.index.get(w, UNKNOWN) for w in words]], dtype=np.int64)
        cases, marks = self.run(ids, np.array([pause_ids(pauses, len(words))], dtype=np.int64))
        return cases[0].argmax(-1).tolist(), marks[0].argmax(-1).tolist()

    def restore(self, text: str, pauses: Sequence[float] | None = None) -> str:
        """Plain words ("WHERE ARE YOU GOING") -> cased, punctuated text ("Where are you going?"). `pauses`:
        the seconds from the previous word's end to each word's start (`labels.word_pauses`), one per word,
        None when unknown (plain text)."""
        words = text.split()
        return render(words, *self.labels(words, pauses)) if words else text


def _torch_run(path: Path, threads: int) -> tuple[list[str], Run, bool]:
    import torch

    from asr.text.restore.model import load_restorer_file

    net, vocab, _ = load_restorer_file(path)

    def run(ids: np.ndarray, pauses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with torch.inference_mode():
            cases, marks = net(torch.from_numpy(ids), torch.from_numpy(pauses))
        return cases.numpy(), marks.numpy()
    return vocab, run, bool(net.cfg.pause_buckets)


def _onnx_run(path: Path, threads: int) -> tuple[list[str], Run, bool]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        meta = session.get_modelmeta().custom_metadata_map
    except Exception as err:  # onnxruntime raises its own types for a missing or corrupt graph
        reason = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        raise RestorerError(f"{path}: not a usable restorer graph ({reason})") from None
    if meta.get("format") not in FORMATS:
        raise RestorerError(f"{path}: not an asr restorer graph (format {meta.get('format')!r}, expected one of "
                            f"{', '.join(map(repr, FORMATS))})")
    uses_pauses = "pauses" in {i.name for i in session.get_inputs()}

    def run(ids: np.ndarray, pauses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cases, marks = session.run(["cases", "marks"], {"ids": ids, "pauses": pauses} if uses_pauses else {"ids": ids})
        return cases, marks
    return json.loads(meta["vocab"]), run, uses_pauses


def default_backend() -> str:
    """onnx where onnxruntime is installed (lighter and faster for this small network), else torch."""
    return "onnx" if installed("onnxruntime") else "torch"


def bundled_restorer(backend: str | None = None) -> Path | None:
    """The restorer shipped in the package for `backend` (torch, onnx; None: the default), or None."""
    return bundled(FILES[backend or default_backend()])


def load_restorer(backend: str | None = None, path: str | Path | None = None, threads: int = 1) -> Restorer:
    """A restorer from `path` (None: the bundled one) run by `backend` (torch, onnx; None: onnx where
    onnxruntime is installed); `threads` for onnxruntime. RestorerError naming the file."""
    backend = backend or default_backend()
    if backend not in FILES:
        raise ValueError(f"restorer backend must be one of {sorted(FILES)} (got {backend!r})")
    path = file_or_bundled(path, FILES[backend], RestorerError, "restorer")
    try:
        vocab, run, uses_pauses = (_torch_run if backend == "torch" else _onnx_run)(path, threads)
    except ModuleNotFoundError as err:
        raise RestorerError(str(needs_train_extra(f"{path} (a torch restorer)", err, ", or give its .onnx export"))
                            if backend == "torch" else f"{path}: the onnx restorer needs onnxruntime: "
                            "pip install 'asr[onnx]'") from None
    return Restorer(vocab, run, backend, path, uses_pauses)
