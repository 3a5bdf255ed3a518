"""Audio in, CTC log-probs out: the streaming front half that every entry point uses.

    recognizer = Recognizer.load()              # bundled default model (backend="onnx": no torch)
    state = recognizer.initial_state()
    for chunk in chunks:                        # 16 kHz float32 samples, any length
        logprobs, state = recognizer.step(chunk, state)     # (T', V) for the frames completed
    logprobs, state = recognizer.finish(state)  # end of input: a short silence flushes the last sounds

or the same loop in one call, which also times each step: `for step in recognizer.stream(chunks): ...`.
Turning log-probs into text is `asr.decoding.Decoder`'s job; `asr.decoding.endpoint` joins the two.

`StreamState` carries everything explicitly: the samples not yet framed, the frames decoded so
far, and the acoustic model's own state (subsampling leftovers, per-layer key/value and conv
caches: bounded by the attention window however long the stream runs).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from asr.audio.chunks import rechunk
from asr.features import Fbank, FbankConfig, num_frames, stream_fbank
from asr.model.backend import AcousticModel, load_backend
from asr.text.tokenizer import Tokenizer


@dataclass
class StreamState:
    pending: np.ndarray  # (P,) samples not yet part of a full frame
    model: Any  # the acoustic model's state (opaque; see asr.model.backend)
    frames: int = 0  # encoder frames produced so far
    samples: int = 0  # samples heard so far


@dataclass
class Step:
    """What one step of `Recognizer.stream` produced."""
    logprobs: np.ndarray  # (T', V) the encoder frames this chunk (or the tail) completed
    state: StreamState
    heard: int  # input samples consumed so far (the tail not counted)
    compute_ms: float
    tail: bool  # True for the last step, over the end-of-input silence


class Recognizer:
    """`tail_seconds`: silence appended at end of input (`finish`, `offline_logprobs`). Without it the
    last few milliseconds never fill a frame, and a causal CTC model that emits a letter a frame or two
    after hearing it drops the final letter of audio cut right after the speech ("EIGH" for "EIGHT")."""

    def __init__(self, model: AcousticModel, tokenizer: Tokenizer, info: dict | None = None,
                 tail_seconds: float = 0.2):
        self.model, self.tokenizer, self.info = model, tokenizer, info or {}
        self.fbank = Fbank(FbankConfig.of(model.cfg.features))
        self.tail = np.zeros(round(tail_seconds * self.fbank.cfg.sample_rate), np.float32)

    @classmethod
    def load(cls, path: str | Path | None = None, backend: str | None = None, threads: int = 1,
             int8: bool = False, device: str | None = None) -> "Recognizer":
        """The model at `path` (torch: a .safetensors file; onnx: an exported folder), else the bundled one;
        `backend` None: `asr.model.backend.default_backend(path)`; `int8`: the export's int8 graph (onnx);
        `device`: cpu, cuda, cuda:N or auto (`asr.model.device`)."""
        return cls(*load_backend(path, backend, threads, int8, device))

    @property
    def frame_seconds(self) -> float:
        """Duration of one encoder frame (10 ms x subsampling)."""
        return self.fbank.cfg.hop_length * self.model.cfg.subsampling / self.fbank.cfg.sample_rate

    @property
    def lookahead_frames(self) -> int:
        """The chunk inside which a frame looks ahead, in encoder frames (0: a strictly causal model)."""
        return self.model.cfg.chunk

    @property
    def lookahead_ms(self) -> float:
        """The chunk inside which a frame looks ahead, in ms (0: a strictly causal model)."""
        return self.model.cfg.chunk * self.frame_seconds * 1000

    def check_chunk_ms(self, chunk_ms: float) -> None:
        """ValueError when audio stepped every `chunk_ms` is shorter than the chunk this model was trained to
        look ahead in: its text comes out a chunk at a time, so shorter steps would only pretend to be faster."""
        if chunk_ms < self.lookahead_ms:
            raise ValueError(f"this model looks ahead inside chunks of {self.lookahead_ms:g} ms: "
                             f"--chunk-ms {chunk_ms:g} is shorter; use at least {self.lookahead_ms:g}")

    def samples_for_frames(self, frames: int, final: bool = True) -> int:
        """The fewest stream samples after which `step` has returned `frames` encoder frames in all: one
        feature frame per full 25 ms window every 10 ms, one encoder frame per `subsampling` of them. A model
        with lookahead computes a chunk's frames once the whole chunk has arrived, or when the stream ends
        (`final`); `final=False` counts the whole chunk holding the last of those frames."""
        if frames <= 0:
            return 0
        chunk = self.model.cfg.chunk
        if chunk and not final:
            frames = -(-frames // chunk) * chunk
        cfg = self.fbank.cfg
        return cfg.win_length + (frames * self.model.cfg.subsampling - 1) * cfg.hop_length

    def initial_state(self) -> StreamState:
        return StreamState(pending=np.zeros(0, np.float32), model=self.model.initial_state(1))

    def step(self, samples: np.ndarray, state: StreamState) -> tuple[np.ndarray, StreamState]:
        """samples (N,) at 16 kHz -> log-probs of the encoder frames they complete (T', V), next state."""
        return self.step_many([samples], [state])[0]

    def step_many(self, chunks: list[np.ndarray], states: list[StreamState],
                  final: bool = False) -> list[tuple[np.ndarray, StreamState]]:
        """`step` for several independent streams at once, their model steps in one backend call
        (`AcousticModel.step_many`). The results equal calling `step` on each stream alone. `final`: the
        streams end with these chunks (`finish`)."""
        feats, pendings = zip(*(stream_fbank(self.fbank, c, s.pending) for c, s in zip(chunks, states)))
        stepped = self.model.step_many(list(feats), [s.model for s in states], final)
        return [(logprobs, replace(s, pending=pending, model=model_state, frames=s.frames + logprobs.shape[0],
                                   samples=s.samples + len(chunk)))
                for (logprobs, model_state), s, pending, chunk in zip(stepped, states, pendings, chunks)]

    def finish(self, state: StreamState) -> tuple[np.ndarray, StreamState]:
        """End of input: `step` over the tail of silence. Returns its log-probs (T', V) and the last state.
        A stream that has not yet heard enough for a frame (a few tens of ms of audio) has nothing to flush."""
        if state.samples < self.samples_for_frames(1):
            return np.zeros((0, self.model.cfg.vocab_size), np.float32), state
        return self.step_many([self.tail], [state], final=True)[0]

    def stream(self, chunks: Iterable[np.ndarray]) -> Iterator[Step]:
        """The one streaming loop: every chunk through `step`, then `finish`, one `Step` each."""
        state, heard = self.initial_state(), 0
        for chunk in chunks:
            chunk = np.asarray(chunk, dtype=np.float32)
            began = time.perf_counter()
            logprobs, state = self.step(chunk, state)
            heard += chunk.size
            yield Step(logprobs, state, heard, (time.perf_counter() - began) * 1000, tail=False)
        began = time.perf_counter()
        logprobs, state = self.finish(state)
        yield Step(logprobs, state, heard, (time.perf_counter() - began) * 1000, tail=True)

    def run(self, wave: np.ndarray, chunk_samples: int = 8000) -> np.ndarray:
        """A whole waveform streamed in chunks (and the tail): log-probs (T', V). Time and memory grow
        linearly with the audio, so hour-long files are fine."""
        outputs = [step.logprobs for step in self.stream(rechunk([wave], chunk_samples))]
        return np.concatenate(outputs)

    def offline_logprobs(self, wave: np.ndarray) -> np.ndarray:
        """The whole utterance (and the tail) in one model call: (T', V). The streaming path, which
        ends with `finish`, gives the same log-probs to float rounding."""
        wave = np.asarray(wave, dtype=np.float32)
        heard = num_frames(wave.size, self.fbank.cfg) // self.model.cfg.subsampling > 0
        feats = self.fbank(np.concatenate([wave, self.tail]) if heard else wave)
        logprobs, _ = self.model.step(feats[None], self.model.initial_state(1), final=True)
        return logprobs[0]
