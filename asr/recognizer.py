"""Audio in, tokens out: the streaming recognizer every entry point uses.

    recognizer = Recognizer.load()              # bundled default model
    state = recognizer.initial_state()
    for chunk in chunks:                        # 16 kHz float32 samples, any length
        logprobs, state = recognizer.step(chunk, state)
    text = recognizer.text(state)

`step` carries everything explicitly in `StreamState`: the samples not yet framed, the
encoder's subsampling frames and per-layer key/value caches (bounded by the window), and
the greedy CTC decoder's last symbol and the tokens so far.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch
from torch import Tensor

from asr.ctc import Token, Word, greedy_tokens, word_times
from asr.encoder import Encoder, EncoderState
from asr.features import Fbank, stream_fbank
from asr.model_io import default_model_path, load_model, random_model
from asr.tokenizer import BLANK, Tokenizer


@dataclass
class StreamState:
    pending: Tensor  # (P,) samples not yet part of a full frame
    encoder: EncoderState
    last_id: int = BLANK  # best CTC symbol of the last encoder frame
    frames: int = 0  # encoder frames emitted so far
    tokens: list[Token] = field(default_factory=list)


class Recognizer:
    def __init__(self, encoder: Encoder, tokenizer: Tokenizer, info: dict | None = None):
        self.encoder, self.tokenizer, self.info = encoder.eval(), tokenizer, info or {}
        self.fbank = Fbank()

    @classmethod
    def load(cls, path: str | None = None, allow_random: bool = False) -> "Recognizer":
        """The model at `path`, else the bundled default; with allow_random an untrained one if none is bundled."""
        if path is None and default_model_path() is None and allow_random:
            return cls(*random_model())
        return cls(*load_model(path))

    @property
    def frame_seconds(self) -> float:
        """Duration of one encoder frame (10 ms x subsampling)."""
        return self.fbank.cfg.hop_length * self.encoder.cfg.subsampling / self.fbank.cfg.sample_rate

    def initial_state(self) -> StreamState:
        return StreamState(pending=torch.zeros(0), encoder=self.encoder.initial_state(1))

    @torch.inference_mode()
    def step(self, samples: Tensor, state: StreamState) -> tuple[Tensor, StreamState]:
        """samples (N,) at 16 kHz -> log-probs of the encoder frames they complete (T', V), next state."""
        feats, pending = stream_fbank(self.fbank, samples, state.pending)
        logprobs, enc_state = self.encoder.step(feats[None], state.encoder)
        logprobs = logprobs[0]
        new_tokens, last_id = greedy_tokens(logprobs, state.last_id, state.frames)
        return logprobs, replace(state, pending=pending, encoder=enc_state, last_id=last_id,
                                 frames=state.frames + logprobs.shape[0], tokens=state.tokens + new_tokens)

    def text(self, state: StreamState, since_token: int = 0) -> str:
        return self.tokenizer.decode([t.id for t in state.tokens[since_token:]])

    def words(self, state: StreamState, since_token: int = 0) -> list[Word]:
        return word_times(state.tokens[since_token:], self.tokenizer, self.frame_seconds)

    def run(self, wave: Tensor, chunk_samples: int = 8000) -> tuple[Tensor, StreamState]:
        """A whole waveform through `step` in chunks: log-probs (T', V) and the final state.
        Time and memory grow linearly with the audio, so hour-long files are fine."""
        state = self.initial_state()
        outputs = []
        for start in range(0, wave.numel(), chunk_samples):
            logprobs, state = self.step(wave[start:start + chunk_samples], state)
            outputs.append(logprobs)
        empty = torch.zeros(0, self.encoder.cfg.vocab_size)
        return (torch.cat(outputs) if outputs else empty), state

    @torch.inference_mode()
    def offline_logprobs(self, wave: Tensor) -> Tensor:
        """The whole-utterance masked forward pass (reference for the streaming path): (T', V)."""
        feats = self.fbank(wave[None])
        return self.encoder(feats)[0][0]
