"""Audio in, tokens out: the streaming recognizer every entry point uses.

    recognizer = Recognizer.load()              # bundled default model
    state = recognizer.initial_state()
    for chunk in chunks:                        # 16 kHz float32 samples, any length
        logprobs, state = recognizer.step(chunk, state)
    logprobs, state = recognizer.finish(state)  # end of input: a short silence flushes the last sounds
    text = recognizer.text(state)

or the same loop in one call, which also times each step: `for step in recognizer.stream(chunks): ...`.

`step` carries everything explicitly in `StreamState`: the samples not yet framed, the
encoder's subsampling frames and per-layer key/value caches (bounded by the window), and
the greedy CTC decoder's last symbol and the tokens so far.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Iterable, Iterator

import numpy as np
import torch
from torch import Tensor

from asr.audio import rechunk
from asr.decoding.ctc import Token, Word, greedy_tokens, word_times
from asr.model.encoder import Encoder, EncoderState
from asr.features import Fbank, num_frames, stream_fbank
from asr.model.loader import default_model_path, load_model, random_model
from asr.tokenizer import BLANK, Tokenizer


@dataclass
class StreamState:
    pending: Tensor  # (P,) samples not yet part of a full frame
    encoder: EncoderState
    last_id: int = BLANK  # best CTC symbol of the last encoder frame
    frames: int = 0  # encoder frames emitted so far
    tokens: list[Token] = field(default_factory=list)


@dataclass
class Step:
    """What one step of `Recognizer.stream` produced."""
    logprobs: Tensor  # (T', V) the encoder frames this chunk (or the tail) completed
    state: StreamState
    heard: int  # input samples consumed so far (the tail not counted)
    compute_ms: float
    tail: bool  # True for the last step, over the end-of-input silence


class Recognizer:
    """`tail_seconds`: silence appended at end of input (`finish`, `offline_logprobs`). Without it the
    last few milliseconds never fill a frame, and a causal CTC model that emits a letter a frame or two
    after hearing it drops the final letter of audio cut right after the speech ("EIGH" for "EIGHT")."""

    def __init__(self, encoder: Encoder, tokenizer: Tokenizer, info: dict | None = None,
                 tail_seconds: float = 0.2):
        self.encoder, self.tokenizer, self.info = encoder.eval(), tokenizer, info or {}
        self.fbank = Fbank()
        self.tail = torch.zeros(round(tail_seconds * self.fbank.cfg.sample_rate))

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

    def finish(self, state: StreamState) -> tuple[Tensor, StreamState]:
        """End of input: `step` over the tail of silence. Returns its log-probs (T', V) and the last state.
        A stream that has not yet produced a frame (a few tens of ms of audio) has nothing to flush."""
        if state.frames == 0:
            return torch.zeros(0, self.encoder.cfg.vocab_size), state
        return self.step(self.tail, state)

    def text(self, state: StreamState, since_token: int = 0) -> str:
        return self.tokenizer.decode([t.id for t in state.tokens[since_token:]])

    def words(self, state: StreamState, since_token: int = 0) -> list[Word]:
        return word_times(state.tokens[since_token:], self.tokenizer, self.frame_seconds)

    def stream(self, chunks: Iterable[Tensor | np.ndarray], keep_tokens: bool = True) -> Iterator[Step]:
        """The one streaming loop: every chunk through `step`, then `finish`, one `Step` each. With
        keep_tokens=False each step's state holds only that step's tokens, so an endless stream
        keeps bounded memory (the caller keeps what it needs)."""
        state, heard = self.initial_state(), 0
        for chunk in chunks:
            chunk = torch.as_tensor(chunk, dtype=torch.float32)
            began = time.perf_counter()
            logprobs, state = self.step(chunk, state)
            heard += chunk.numel()
            yield Step(logprobs, state, heard, (time.perf_counter() - began) * 1000, tail=False)
            if not keep_tokens:
                state = replace(state, tokens=[])
        began = time.perf_counter()
        logprobs, state = self.finish(state)
        yield Step(logprobs, state, heard, (time.perf_counter() - began) * 1000, tail=True)

    def run(self, wave: Tensor, chunk_samples: int = 8000) -> tuple[Tensor, StreamState]:
        """A whole waveform streamed in chunks: log-probs (T', V) and the final state. Time and
        memory grow linearly with the audio, so hour-long files are fine."""
        outputs = []
        for step in self.stream(rechunk([wave], chunk_samples)):
            outputs.append(step.logprobs)
        return torch.cat(outputs), step.state

    @torch.inference_mode()
    def offline_logprobs(self, wave: Tensor) -> Tensor:
        """The whole-utterance masked forward pass over the audio and the tail (reference for the
        streaming path, which ends with `finish`): (T', V)."""
        heard = self.encoder.output_lengths(torch.tensor([num_frames(wave.numel(), self.fbank.cfg)]))[0] > 0
        feats = self.fbank((torch.cat([wave, self.tail]) if heard else wave)[None])
        return self.encoder(feats)[0][0]
