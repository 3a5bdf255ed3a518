"""The acoustic model: frame normalisation -> causal subsampling -> N pre-norm Transformer blocks -> CTC output.

Two entry points share every weight and every line of arithmetic:
  forward(feats, lengths)        whole utterances (training, tests), (B, T, F) -> (B, T/S, V)
  step(feats_chunk, state)       one chunk of a stream, returns the new state explicitly
Feeding a stream to `step` in chunks of any size (the last with final=True) gives the log-probs
`forward` gives on the whole stream (to float rounding), while the state stays bounded by the
attention window. A model with lookahead inside the chunk (cfg.chunk) computes whole chunks only:
the frames of a chunk still filling wait in the state until it fills or the stream ends.
Shapes: B batch, T frames (10 ms), S subsampling factor, D width, H heads, V vocabulary.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from asr.model.attention import SelfAttention, Span, carried_rows, take_rows
from asr.model.config import EncoderConfig, frames_out, ready_frames


class FrameNorm(nn.Module):
    """Normalise log-mel frames with the stored training mean and std (`asr.model.normalise`: `global`), or
    subtract a causal running mean of the stream's own frames that starts from the stored one (`running`)."""

    def __init__(self, n_mels: int = 80):
        super().__init__()
        self.register_buffer("mean", torch.zeros(n_mels))
        self.register_buffer("std", torch.ones(n_mels))

    def set_stats(self, mean: Tensor, std: Tensor) -> None:
        self.mean.copy_(mean)
        self.std.copy_(std.clamp_min(1e-3))

    def forward(self, feats: Tensor) -> Tensor:
        return (feats - self.mean) / self.std

    def running(self, feats: Tensor, mean: Tensor, count: Tensor, prior: int, horizon: int) -> tuple[Tensor, Tensor]:
        """feats (B, T, F), each row's running mean (B, F) and frames seen (B,) -> normalised (B, T, F) and the
        new means: frame by frame, as `asr.model.normalise.running_norm` (padding at a row's end never
        reaches its real frames)."""
        out = torch.empty_like(feats)
        seen = count[:, None].to(torch.float32) + 1 + prior  # (B, 1)
        for t in range(feats.shape[1]):
            weight = 1.0 / (seen + t).clamp(max=max(horizon, 1))
            mean = mean + weight * (feats[:, t] - mean)
            out[:, t] = feats[:, t] - mean
        return out / self.std, mean


@dataclass
class EncoderState:
    """Everything `Encoder.step` carries from one chunk to the next; its size is bounded by W."""

    frames: Tensor  # (B, P, F) normalised frames not yet consumed (P < kernel + chunk x S)
    invalid: Tensor  # (B,) leading cache slots of each row that hold no frame yet (start of its stream)
    keys: list[Tensor] = field(default_factory=list)  # per layer (B, H, W-1, D/H)
    values: list[Tensor] = field(default_factory=list)
    convs: list[Tensor] = field(default_factory=list)  # per layer (B, conv_kernel-1, D) conv inputs (if any)
    norm_mean: Tensor | None = None  # (B, F) the running mean of each stream's frames (cfg.norm == "running")
    norm_count: Tensor | None = None  # (B,) frames each stream has taken into it

    def numel(self) -> int:
        return self.frames.numel() + sum(t.numel() for t in self.keys + self.values + self.convs)

    @staticmethod
    def cat(states: list["EncoderState"], frames: Tensor | None = None) -> "EncoderState":
        """The rows of `states`, in order, as one state; `frames`, if given, stands in for their leftover
        frames (which cannot be joined when their lengths differ)."""
        return EncoderState(frames=torch.cat([s.frames for s in states]) if frames is None else frames,
                            invalid=torch.cat([s.invalid for s in states]),
                            keys=[torch.cat(layer) for layer in zip(*(s.keys for s in states))],
                            values=[torch.cat(layer) for layer in zip(*(s.values for s in states))],
                            convs=[torch.cat(layer) for layer in zip(*(s.convs for s in states))],
                            norm_mean=_cat_or_none([s.norm_mean for s in states]),
                            norm_count=_cat_or_none([s.norm_count for s in states]))

    def row(self, i: int, frames: Tensor | None = None) -> "EncoderState":
        """Row `i` as a batch-1 state; `frames` (1, P, F), if given, are its leftover frames."""
        return EncoderState(frames=self.frames[i:i + 1] if frames is None else frames, invalid=self.invalid[i:i + 1],
                            keys=[k[i:i + 1] for k in self.keys], values=[v[i:i + 1] for v in self.values],
                            convs=[c[i:i + 1] for c in self.convs],
                            norm_mean=None if self.norm_mean is None else self.norm_mean[i:i + 1],
                            norm_count=None if self.norm_count is None else self.norm_count[i:i + 1])


def _cat_or_none(tensors: list[Tensor | None]) -> Tensor | None:
    return None if tensors[0] is None else torch.cat(tensors)


class CausalSubsampling(nn.Module):
    """Time subsampling by S, valid in time and left-padded, so encoder frame j sees feature frames
    up to (j+1)S-1 and nothing later. Two front ends (`cfg.frontend`):

    conv1d: one strided Conv1d over `subsampling_kernel` frames, GELU, Linear to D.
    conv2d: log2(S) Conv2d layers (3x3, stride 2 in time and frequency, GELU) over the (time, mel)
            plane, then a Linear to D. Shift-invariant in frequency, so it copes better with voices
            of different pitch and vocal-tract length; narrow channels keep it cheap on CPUs. The
            stack is one strided operator over time with a receptive field of 2S-1 frames. For S=8
            the stack stops at 4 and a Linear merges each pair of its 40 ms frames (2D -> D, starting
            as their mean): a 40 ms model's front end and blocks carry over unchanged (init_body_from),
            and the whole is one strided operator over 11 frames.
    whisper: Whisper's front end made causal: Conv1d over 3 frames, GELU, Conv1d over 3 of those with
            stride 2, GELU (no projection: Whisper's blocks read the convolutions' output). One strided
            operator over 5 frames.
    """

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.stride, self.two_d, self.whisper = cfg.subsampling, cfg.frontend == "conv2d", cfg.frontend == "whisper"
        if self.whisper:
            self.kernel = 5
            self.conv1 = nn.Conv1d(cfg.n_mels, cfg.d_model, 3)
            self.conv2 = nn.Conv1d(cfg.d_model, cfg.d_model, 3, stride=2)
            self.width = cfg.d_model
        elif self.two_d:
            stack = min(cfg.subsampling, 4)  # the Conv2d layers' stride; beyond it, frames are merged in pairs
            self.pairs = cfg.subsampling > stack
            self.kernel = 2 * stack - 1 + (stack if self.pairs else 0)
            layers, channels, bins = [], 1, cfg.n_mels
            for _ in range(stack.bit_length() - 1):
                layers += [nn.Conv2d(channels, cfg.frontend_channels, 3, stride=2), nn.GELU()]
                channels, bins = cfg.frontend_channels, (bins - 3) // 2 + 1
            self.convs = nn.Sequential(*layers)
            self.proj = nn.Linear(channels * bins, cfg.d_model)
            if self.pairs:
                self.merge = nn.Linear(2 * cfg.d_model, cfg.d_model)
                with torch.no_grad():  # the mean of the pair
                    self.merge.weight.copy_(0.5 * torch.eye(cfg.d_model).repeat(1, 2))
                    self.merge.bias.zero_()
        else:
            self.kernel = cfg.subsampling_kernel
            self.conv = nn.Conv1d(cfg.n_mels, cfg.d_model, self.kernel, stride=self.stride)
            self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        if not self.whisper:
            self.width = self.proj.out_features

    @property
    def left_context(self) -> int:
        return self.kernel - self.stride

    def frames_out(self, frames: int) -> int:
        """Output frames for `frames` input frames (left padding included)."""
        return frames_out(frames, self.kernel, self.stride)

    def forward(self, frames: Tensor) -> Tensor:
        """(B, T, F), already left-padded by `left_context` -> (B, (T - kernel) // S + 1, D)."""
        if frames.shape[1] < self.kernel:
            return frames.new_zeros(frames.shape[0], 0, self.width)
        if self.whisper:
            x = F.gelu(self.conv2(F.gelu(self.conv1(frames.transpose(1, 2)))))  # (B, D, T')
            return x.transpose(1, 2)
        if not self.two_d:
            return self.proj(F.gelu(self.conv(frames.transpose(1, 2)).transpose(1, 2)))  # (B, T', D)
        x = self.proj(self.convs(frames[:, None]).transpose(1, 2).flatten(2))  # (B, C, T', F') -> (B, T', D)
        if self.pairs:  # (B, 2 T'', D) -> (B, T'', 2 D) -> (B, T'', D); an odd last frame waits for its pair
            pairs = x.shape[1] // 2
            x = self.merge(x[:, :2 * pairs].reshape(x.shape[0], pairs, 2 * x.shape[2]))
        return x


class CausalConv(nn.Module):
    """Conformer-style convolution module without look-ahead: LayerNorm -> GLU -> causal depthwise
    conv over `kernel` frames -> SiLU -> Linear. It carries its last kernel-1 inputs between chunks;
    a new stream starts from zeros, exactly like the zero padding of a whole-utterance forward."""

    def __init__(self, d_model: int, kernel: int):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.gate = nn.Linear(d_model, 2 * d_model)
        self.depthwise = nn.Conv1d(d_model, d_model, kernel, groups=d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor, cache: Tensor, keep: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """x (B, T, D), cache (B, kernel-1, D) -> (B, T, D) and the next cache; `keep` (B, kernel-1), if
        given: the `carried_rows` of each row's last kernel-1 real frames (rows padded at the end)."""
        if x.shape[1] == 0:
            return x, cache
        y = torch.cat([cache, F.glu(self.gate(self.norm(x)), dim=-1)], dim=1)  # (B, K-1+T, D)
        # the depthwise Conv1d's weights run as a (1, K) Conv2d: the same arithmetic, and onnxruntime's
        # depthwise Conv2d is several times faster than its grouped Conv1d
        out = F.conv2d(y.transpose(1, 2).unsqueeze(2), self.depthwise.weight.unsqueeze(2), self.depthwise.bias,
                       groups=self.depthwise.groups).squeeze(2).transpose(1, 2)  # (B, T, D)
        next_cache = y[:, y.shape[1] - cache.shape[1]:] if keep is None else take_rows(y, keep)
        return self.out(F.silu(out)), next_cache


class Block(nn.Module):
    """Pre-norm Transformer block: x + attn(norm(x)), [x + conv(x)], then x + ffn(norm(x))."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.attn_norm = nn.LayerNorm(cfg.d_model)
        self.attn = SelfAttention(cfg.d_model, cfg.n_heads, cfg.window, cfg.max_distance, cfg.chunk, cfg.max_chunk)
        self.conv = CausalConv(cfg.d_model, cfg.conv_kernel) if cfg.conv_kernel else None
        self.ff_norm = nn.LayerNorm(cfg.d_model)
        self.ff = nn.Sequential(nn.Linear(cfg.d_model, cfg.ff_mult * cfg.d_model), nn.GELU(),
                                nn.Dropout(cfg.dropout), nn.Linear(cfg.ff_mult * cfg.d_model, cfg.d_model))
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, k_cache: Tensor, v_cache: Tensor, conv_cache: Tensor | None, span: Span,
                conv_keep: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """x (B, T, D) and this layer's caches -> (B, T, D) and its next caches; `span` and `conv_keep`
        (`carried_rows` of the conv caches, for padded rows) are the step's, shared by every layer."""
        y, k_cache, v_cache = self.attn(self.attn_norm(x), k_cache, v_cache, span)
        x = x + self.drop(y)
        if self.conv is not None:
            y, conv_cache = self.conv(x, conv_cache, conv_keep)
            x = x + self.drop(y)
        x = x + self.drop(self.ff(self.ff_norm(x)))
        return x, k_cache, v_cache, conv_cache


class Encoder(nn.Module):
    """Streaming CTC acoustic model over log-mel frames."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.cfg = cfg.validate()
        self.cmvn = FrameNorm(cfg.n_mels)
        self.subsampling = CausalSubsampling(cfg)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.LayerNorm(cfg.d_model)
        self.ctc = nn.Linear(cfg.d_model, cfg.vocab_size)

    def set_chunk(self, chunk: int) -> "Encoder":
        """Compute with lookahead inside chunks of `chunk` frames from now on (0: none), any size up to the
        longest the model holds biases for (cfg.max_chunk, else cfg.chunk): a model trained at several sizes
        serves at a shorter one with a shorter wait. Its config then says both (a saved file keeps them)."""
        if not 0 <= chunk <= self.cfg.longest_chunk:
            raise ValueError(f"chunk={chunk}: this model holds lookahead biases for chunks of up to "
                             f"{self.cfg.longest_chunk} frames")
        self.cfg = self.cfg.with_chunk(chunk)
        for block in self.blocks:
            block.attn.chunk = chunk
        return self

    def output_lengths(self, lengths: Tensor) -> Tensor:
        """Encoder frames for `lengths` feature frames."""
        return lengths // self.cfg.subsampling

    def forward(self, feats: Tensor, lengths: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Whole utterances: log-mel (B, T, F) -> CTC log-probs (B, T // S, V) and their lengths (B,)."""
        if lengths is None:
            lengths = torch.full((feats.shape[0],), feats.shape[1], device=feats.device)
        state = self.initial_state(feats.shape[0], feats.device, cache_slots=0)  # nothing to attend before t=0
        logprobs, _ = self.step(feats, state, final=True)
        return logprobs, self.output_lengths(lengths)

    def initial_state(self, batch: int = 1, device: torch.device | str = "cpu",
                      cache_slots: int | None = None) -> EncoderState:
        """A new stream. The caches have W-1 slots (fixed shapes for streaming), all marked empty;
        `cache_slots=0` starts with no slots instead (a whole-utterance forward needs none)."""
        cfg, pad = self.cfg, self.subsampling.left_context
        heads, head_dim = cfg.n_heads, cfg.d_model // cfg.n_heads
        slots = 0 if cfg.window is None else cfg.window - 1
        slots = slots if cache_slots is None else cache_slots
        empty = torch.zeros(batch, heads, slots, head_dim, device=device)
        convs = [torch.zeros(batch, cfg.conv_kernel - 1, cfg.d_model, device=device)] * cfg.n_layers if cfg.conv_kernel else []
        running = cfg.norm == "running"
        return EncoderState(frames=torch.zeros(batch, pad, cfg.n_mels, device=device),
                            invalid=torch.full((batch,), slots, dtype=torch.long, device=device),
                            keys=[empty] * cfg.n_layers, values=[empty] * cfg.n_layers, convs=convs,
                            norm_mean=self.cmvn.mean.expand(batch, -1).clone() if running else None,
                            norm_count=torch.zeros(batch, dtype=torch.long, device=device) if running else None)

    def normalise(self, feats: Tensor, state: EncoderState) -> tuple[Tensor, EncoderState]:
        """Raw log-mel (B, T, F) -> normalised frames and the state with the running mean moved on (cfg.norm)."""
        if self.cfg.norm != "running":
            return self.cmvn(feats), state
        normed, mean = self.cmvn.running(feats, state.norm_mean, state.norm_count, self.cfg.norm_prior,
                                         self.cfg.norm_horizon)
        return normed, replace(state, norm_mean=mean, norm_count=state.norm_count + feats.shape[1])

    def step(self, feats: Tensor, state: EncoderState, final: bool = False) -> tuple[Tensor, EncoderState]:
        """One chunk of any length: log-mel (B, C, F) -> new CTC log-probs (B, C', V) and the next state;
        `final`: the stream ends here (a lookahead model computes its last, partial chunk)."""
        normed, state = self.normalise(feats, state)
        frames = torch.cat([state.frames, normed], dim=1)
        x = self.subsampling(frames)  # (B, C', D)
        x = x[:, :ready_frames(x.shape[1], self.cfg.chunk, final)]
        logprobs, state = self._blocks(x, state)
        return logprobs, replace(state, frames=frames[:, x.shape[1] * self.subsampling.stride:])

    def step_rows(self, feats: list[Tensor], states: list[EncoderState],
                  final: bool = False) -> list[tuple[Tensor, EncoderState]]:
        """Independent streams in one pass, each with a chunk of its own length: log-mel (1, T_i, F) and
        a batch-1 state per stream -> (log-probs (1, T_i', V), next state) per stream, equal to `step`
        on each alone (to float rounding), through one `step_padded`. Streaming states only."""
        normed = [self.normalise(f, s) for f, s in zip(feats, states)]
        states = [s for _, s in normed]
        frames = [torch.cat([s.frames[0], n[0]]) for (n, _), s in zip(normed, states)]  # (P_i + T_i, F)
        ends = torch.tensor([ready_frames(self.subsampling.frames_out(f.shape[0]), self.cfg.chunk, final) for f in frames],
                            device=frames[0].device)
        joined = EncoderState.cat(states, frames=states[0].frames)  # the leftovers travel in `frames`
        logprobs, joined = self.step_padded(torch.nn.utils.rnn.pad_sequence(frames, batch_first=True), ends, joined)
        stride = self.subsampling.stride
        return [(logprobs[i:i + 1, :ends[i]], joined.row(i, frames=frames[i][None, ends[i] * stride:]))
                for i in range(len(frames))]

    def step_padded(self, frames: Tensor, ends: Tensor, state: EncoderState) -> tuple[Tensor, EncoderState]:
        """Independent streams whose chunks differ in length, as one batch (the ONNX graph's contract).
        frames (B, S, F): each row's normalised frames (its state's leftover frames, then its new ones),
        padded at the end; ends (B,): the encoder frames each row's real frames complete
        (`CausalSubsampling.frames_out`). Returns log-probs (B, C, V), of which row b's first ends[b] are
        real, and the state with the new caches, each row's cut at its own last real frame (the
        leftover frames are the caller's: frames[b, ends[b] * S : its length]). Padding never reaches a
        real frame: the subsampling, attention and convolution are all causal. Streaming states only
        (caches of W-1 slots)."""
        if self.cfg.window is None:
            raise ValueError("padded steps need sliding-window attention (caches of a fixed size)")
        return self._blocks(self.subsampling(frames), state, ends)

    def _blocks(self, x: Tensor, state: EncoderState, ends: Tensor | None = None) -> tuple[Tensor, EncoderState]:
        """Subsampled frames (B, C', D) through the blocks and the CTC head -> log-probs (B, C', V) and the
        state with new caches (`ends` (B,): each row's real frames, when rows are padded)."""
        keys, values, convs = [], [], []
        conv_caches = state.convs or [None] * len(self.blocks)
        frames, cached = x.shape[1], state.keys[0].shape[2]
        span = self.blocks[0].attn.span(frames, cached + frames, state.invalid, ends)  # shared by every layer
        conv_keep = None
        if ends is not None and state.convs:
            size = self.cfg.conv_kernel - 1
            conv_keep = carried_rows(ends, 1, size + frames, size)[:, 0]  # (B, K-1)
        for block, k_cache, v_cache, conv_cache in zip(self.blocks, state.keys, state.values, conv_caches):
            x, k_cache, v_cache, conv_cache = block(x, k_cache, v_cache, conv_cache, span, conv_keep)
            keys.append(k_cache)
            values.append(v_cache)
            if conv_cache is not None:
                convs.append(conv_cache)
        logprobs = self.ctc(self.norm(x)).log_softmax(dim=-1)
        used = x.shape[1] if ends is None else ends
        return logprobs, replace(state, keys=keys, values=values, convs=convs, invalid=(state.invalid - used).clamp(min=0))

    def stream(self, feats: Tensor, chunk_frames: int) -> Tensor:
        """Whole utterances through `step` in chunks: time and memory linear in T. (B, T, F) -> (B, T // S, V)."""
        state = self.initial_state(feats.shape[0], feats.device)
        outputs = []
        for start in range(0, feats.shape[1], chunk_frames):
            logprobs, state = self.step(feats[:, start:start + chunk_frames], state,
                                        final=start + chunk_frames >= feats.shape[1])
            outputs.append(logprobs)
        return torch.cat(outputs, dim=1) if outputs else feats.new_zeros(feats.shape[0], 0, self.cfg.vocab_size)
