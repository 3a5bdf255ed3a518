"""The torch backend: `Encoder` behind the numpy interface of `asr.model.backend.AcousticModel`."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from asr.model.encoder import Encoder, EncoderState
from asr.model.loader import load_model
from asr.text.tokenizer import Tokenizer


class TorchModel:
    """Runs an `Encoder` in inference mode on `device` (cpu, cuda, cuda:N): its weights, states and each step's
    tensors live there; arrays in and out are numpy float32 on the CPU."""

    def __init__(self, encoder: Encoder, device: str = "cpu"):
        self.device = torch.device(device)
        self.encoder = encoder.eval().to(self.device)
        self.cfg = encoder.cfg

    def initial_state(self, batch: int = 1) -> EncoderState:
        return self.encoder.initial_state(batch, self.device)

    def _tensor(self, feats: np.ndarray) -> torch.Tensor:
        """numpy frames -> a float32 tensor on the model's device."""
        return torch.from_numpy(np.ascontiguousarray(feats, dtype=np.float32)).to(self.device)

    @torch.inference_mode()
    def step(self, feats: np.ndarray, state: EncoderState, final: bool = False) -> tuple[np.ndarray, EncoderState]:
        logprobs, state = self.encoder.step(self._tensor(feats), state, final)
        return logprobs.cpu().numpy(), state

    @torch.inference_mode()
    def step_many(self, feats: list[np.ndarray], states: list[EncoderState],
                  final: bool = False) -> list[tuple[np.ndarray, EncoderState]]:
        """Independent streams in one call: their frames padded into one batch (`Encoder.step_rows`)."""
        if self.cfg.window is None or len(feats) == 1:  # full attention: caches differ in length
            return _grouped_step_many(self, feats, states, final)
        rows = self.encoder.step_rows([self._tensor(f)[None] for f in feats], states, final)
        return [(logprobs[0].cpu().numpy(), state) for logprobs, state in rows]

    def batch_key(self, state: EncoderState) -> tuple:
        """The shapes that rows of one batch share: leftover frames and (full attention) cache length."""
        return tuple(t.shape[1:] for t in [state.frames, *state.keys[:1]])

    def stack_states(self, states: list[EncoderState]) -> EncoderState:
        return EncoderState.cat(states)

    def split_states(self, state: EncoderState) -> list[EncoderState]:
        return [state.row(i) for i in range(state.frames.shape[0])]


def _grouped_step_many(model: TorchModel, feats: list[np.ndarray], states: list[EncoderState],
                       final: bool = False) -> list[tuple[np.ndarray, EncoderState]]:
    """`step_many` by stacking the streams whose chunks have as many frames and whose states have the
    same `batch_key`: one `step` per such group."""
    results: list[tuple[np.ndarray, EncoderState] | None] = [None] * len(feats)
    groups: dict[tuple, list[int]] = {}
    for i, (f, s) in enumerate(zip(feats, states)):
        groups.setdefault((f.shape[0], model.batch_key(s)), []).append(i)
    for rows in groups.values():
        batch = np.stack([feats[i] for i in rows])  # (B, T, F)
        state = states[rows[0]] if len(rows) == 1 else model.stack_states([states[i] for i in rows])
        logprobs, state = model.step(batch, state, final)
        row_states = [state] if len(rows) == 1 else model.split_states(state)
        for j, i in enumerate(rows):
            results[i] = (logprobs[j], row_states[j])
    return results


def load_torch(path: str | Path | None, threads: int = 1, device: str = "cpu") -> tuple[TorchModel, Tokenizer, dict]:
    """The model file at `path` (None: the bundled one) on `device` (checked: `asr.model.device.torch_device`),
    with torch limited to `threads` CPU threads."""
    torch.set_num_threads(threads)
    encoder, tokenizer, info = load_model(path)
    return TorchModel(encoder, device), tokenizer, info
