"""What the recognizer needs of an acoustic model, whatever runs it: torch or onnxruntime.

Everything on the inference path outside `asr.model` works on numpy arrays, so a backend is a
small object with an explicit streaming state:

    model, tokenizer, info = load_backend(path, backend="torch")   # or "onnx" (a folder from asr.export)
    state = model.initial_state(batch=1)
    logprobs, state = model.step(feats, state)    # log-mel (B, T, F) -> log-probs (B, T', V)

`step` takes raw log-mel frames (the model applies its own CMVN) of any count T, including 0,
and returns the log-probs of the encoder frames they complete. Feeding a stream in chunks of any
size gives the log-probs of one call over the whole stream (to float rounding). The state is
opaque to callers. `step_many` steps independent streams together, whatever their chunk lengths:
both backends pad their frames into one batch (`Encoder.step_padded`; every row keeps its own caches
and its own count of empty cache slots).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import numpy as np

from asr.model.config import EncoderConfig
from asr.model.errors import installed, needs_train_extra
from asr.model.folder import folder_backend, model_folder, resolve
from asr.text.tokenizer import Tokenizer

BACKENDS = ("torch", "onnx")


class AcousticModel(Protocol):
    cfg: EncoderConfig

    def initial_state(self, batch: int = 1) -> Any:
        """The state of `batch` new streams."""

    def step(self, feats: np.ndarray, state: Any, final: bool = False) -> tuple[np.ndarray, Any]:
        """Log-mel frames (B, T, F) float32 -> log-probs (B, T', V) float32 and the next state; `final`: the
        streams end here (a model with lookahead inside the chunk then computes its last, partial chunk)."""

    def step_many(self, feats: list[np.ndarray], states: list[Any], final: bool = False) -> list[tuple[np.ndarray, Any]]:
        """Independent streams in one call: log-mel (T_i, F) and a batch-1 state each -> (log-probs
        (T_i', V), next state) each, equal to `step` on each alone (to float rounding)."""


def default_backend(path: str | Path | None = None) -> str:
    """The backend for `path` when none is named: onnx for an exported folder or graph, else torch (a
    .safetensors file); a model folder's as `asr.model.folder.folder_backend` says. For the bundled model (None), onnx where onnxruntime is installed and the package
    ships the model's export (the same text as torch, about twice as fast per chunk at 1 thread), else torch."""
    if (folder := model_folder(path)) is not None:
        return folder_backend(folder, installed("onnxruntime"))
    if path is not None:
        return "onnx" if Path(path).is_dir() or Path(path).suffix == ".onnx" else "torch"
    from asr.model.onnx_backend import default_onnx_dir  # numpy only: onnxruntime loads with a graph

    if installed("onnxruntime") and default_onnx_dir() is not None:
        return "onnx"
    return "torch" if installed("torch") else "onnx"


def load_backend(path: str | Path | None = None, backend: str | None = None,
                 threads: int = 1, int8: bool = False, device: str | None = None) -> tuple[AcousticModel, Tokenizer, dict]:
    """(model, tokenizer, info) for a model file (torch: .safetensors; None: the bundled model), an
    exported folder (onnx) or a model folder (`asr.model.folder`: either); `backend` None:
    `default_backend(path)`. `threads`: CPU threads for the backend's math; `int8`: the export's int8 graph
    (onnx only); `device`: cpu, cuda, cuda:N or auto (`asr.model.device`: a GPU needs torch; unnamed, a GPU
    picks torch for the bundled model or a model folder, and auto takes one where torch sees it). Only the chosen backend's library is imported: the onnx path never imports torch."""
    from asr.model import device as devices

    own = path is None or model_folder(path) is not None  # the bundled model, or a model folder: both ship weights
    if backend is None and own and (devices.wants_gpu(device) or (device == "auto" and devices.gpu_visible())):
        backend = "torch"
    backend = backend or default_backend(path)
    path = resolve(path, backend)  # a model folder's weights or export
    if backend == "onnx":
        devices.for_onnx(device)
    if int8 and backend != "onnx":
        raise ValueError("an int8 graph needs the onnx backend")
    if backend == "torch":
        try:
            from asr.model.torch_backend import load_torch
        except ModuleNotFoundError as err:
            raise needs_train_extra("the torch backend", err, ", or use the onnx backend (--backend onnx)") from None
        return load_torch(path, threads, devices.torch_device(device))
    if backend == "onnx":
        from asr.model.onnx_backend import load_onnx
        return load_onnx(path, threads, int8)
    raise ValueError(f"backend={backend!r} must be one of {', '.join(BACKENDS)}")
