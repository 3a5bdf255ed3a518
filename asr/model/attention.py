"""Multi-head self-attention under a sliding-window causal mask, with an explicit key/value cache.

Frame t attends to frames t-W+1 .. t (W = window; window=None means full causal attention).
With lookahead inside the chunk (chunk = C > 0), frame t also sees the later frames of its own chunk
of C frames (chunks counted from the stream's start): tokens leave once per chunk anyway, so this
costs no latency. Position enters only as a learned per-head bias over the distance t - s (0 .. W-1,
and -(C-1) .. -1 ahead), so the output never depends on where in the stream a frame sits: minute
100 behaves like minute 1. A model trained at several chunk sizes (dynamic chunk training) holds the
biases of its longest and computes with any shorter chunk: the shorter one's distances are the last.

The same `forward` serves training (empty cache, whole utterance) and streaming (the cache
holds the last W-1 frames' keys and values from earlier chunks). Padding in a batch is
always at the end of an utterance, so under a causal mask a real frame never sees a padded
key: each utterance's outputs equal those it gets alone.

What depends only on the step's shapes (the mask, the distances, which frames each row carries
on) is a `Span`, built once per step and shared by every layer: an exported graph then holds
one copy of that arithmetic instead of one per layer.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def sliding_window_mask(num_queries: int, num_keys: int, window: int | None, invalid_keys: int | Tensor = 0,
                        device: torch.device | None = None, chunk: int = 0, ends: Tensor | None = None) -> Tensor:
    """Boolean mask, True where query i may attend key j: (Tq, Tk), or (B, Tq, Tk) for per-row `invalid_keys`.

    The queries are the last Tq of the Tk key frames (the first Tk - Tq keys come from the cache),
    and the first `invalid_keys` cache slots (an int, or a (B,) tensor: one count per stream) hold
    nothing yet. distance = (Tk - Tq + i) - j. `chunk` C > 0: a query also sees every new key of its
    own chunk (the step's new frames start on a chunk boundary), of which row b's first ends[b] are
    real when `ends` (B,) is given.
    """
    q = torch.arange(num_queries, device=device)[:, None] + (num_keys - num_queries)
    k = torch.arange(num_keys, device=device)[None, :]
    distance = q - k
    invalid = torch.as_tensor(invalid_keys, device=device)[..., None, None]  # () or (B,) -> (..., 1, 1)
    allowed = (distance >= 0) & (k >= invalid)
    if window is not None:
        allowed = allowed & (distance < window)
    if chunk:
        new_key = k - (num_keys - num_queries)  # (1, Tk) index among the step's new frames (< 0: cached)
        query = torch.arange(num_queries, device=device)[:, None]
        ahead = (new_key >= 0) & (new_key // chunk == query // chunk)  # (Tq, Tk) the query's own chunk
        if ends is not None:
            ahead = ahead & (new_key < ends[:, None, None])  # (B, Tq, Tk): never a padded key
        allowed = allowed | ahead
    return allowed


def carried_rows(ends: Tensor, channels: int, length: int, count: int) -> Tensor:
    """Which frames each stream carries to its next chunk, as rows of a flattened sequence.

    A sequence (B, C, length, E) holding `count` frames of cache then new ones, of which row b's first
    ends[b] are real, viewed as (B * C * length, E): the indices (B, C, count) of each row's last
    `count` frames up to its real end (frames ends[b] .. ends[b] + count - 1), in every channel."""
    first = (torch.arange(ends.shape[0], device=ends.device)[:, None] * channels
             + torch.arange(channels, device=ends.device)) * length + ends[:, None]  # (B, C)
    return first[..., None] + torch.arange(count, device=ends.device)


def take_rows(seq: Tensor, rows: Tensor) -> Tensor:
    """seq (B, ..., E) viewed as rows of E, and `carried_rows` (B, ..., count) -> (B, ..., count, E): the
    frames each stream carries on. One row gather (an index per frame, not per element) straight into
    the output's shape: the same op in eager torch and in the ONNX graph."""
    return seq.reshape(-1, seq.shape[-1])[rows]


@dataclass
class Span:
    """What every layer's attention shares in one step (B rows, Tq new frames, Tk = cached + new keys)."""
    mask: Tensor  # (B, 1, Tq, Tk) additive (or (1, Tq, Tk) for one `invalid` count): 0 where query i may
    #               attend key j, -inf elsewhere
    distance: Tensor  # (Tq, Tk) bias bucket of each query-key distance (clamped to the first and last buckets;
    #                   with lookahead the first C-1 buckets are the distances -(C-1) .. -1)
    keep: Tensor | None  # `carried_rows` (B, H, W-1) of the keys/values (padded rows); None: the last W-1 of all

    @classmethod
    def build(cls, num_queries: int, num_keys: int, window: int | None, buckets: int, invalid: Tensor | int,
              heads: int, ends: Tensor | None = None, chunk: int = 0) -> "Span":
        """buckets: the distance-bias buckets; invalid (B,) or an int: each row's empty leading cache slots;
        ends (B,), if given: each row's real new frames (the rest padding; a streaming step with W-1 cache
        slots); chunk: lookahead inside chunks of this many frames (0: none)."""
        invalid = torch.as_tensor(invalid)
        device = invalid.device
        allowed = sliding_window_mask(num_queries, num_keys, window, invalid, device, chunk, ends)  # (B, Tq, Tk)
        mask = torch.zeros(allowed.shape, device=device).masked_fill(~allowed, float("-inf")).unsqueeze(-3)
        q = torch.arange(num_queries, device=device)[:, None] + (num_keys - num_queries)
        ahead = max(chunk - 1, 0)
        distance = (q - torch.arange(num_keys, device=device)[None, :]).clamp(-ahead, buckets - 1) + ahead
        keep = None
        if ends is not None and window is not None:
            keep = carried_rows(ends, heads, num_keys, window - 1)
        return cls(mask, distance, keep)


class SelfAttention(nn.Module):
    """Sliding-window causal multi-head self-attention with a relative-distance bias."""

    def __init__(self, d_model: int, n_heads: int, window: int | None, max_distance: int, chunk: int = 0,
                 max_chunk: int = 0):
        """chunk: the lookahead chunk it computes with (0: none); max_chunk: the longest it holds biases for
        (0: chunk), so that `chunk` may change to any size up to it (dynamic chunk training, serving shorter)."""
        super().__init__()
        self.n_heads, self.window, self.head_dim, self.chunk = n_heads, window, d_model // n_heads, chunk
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.num_buckets = window if window is not None else max_distance
        self.distance_bias = nn.Parameter(torch.zeros(n_heads, self.num_buckets))  # (H, buckets): distances 0, 1, ..
        # lookahead: the distances -(M-1) .. -1 inside the chunk, apart so a causal model's biases carry over
        longest = max(chunk, max_chunk)  # (EncoderConfig.longest_chunk)
        self.ahead_bias = nn.Parameter(torch.zeros(n_heads, longest - 1)) if longest > 1 else None  # (H, M-1)

    @property
    def cache_size(self) -> int | None:
        """Frames of keys/values carried to the next chunk (None: unbounded, full attention)."""
        return None if self.window is None else self.window - 1

    def span(self, num_queries: int, num_keys: int, invalid: Tensor | int, ends: Tensor | None = None) -> Span:
        """The `Span` of a step of this layer's shape (see `Span.build`)."""
        return Span.build(num_queries, num_keys, self.window, self.num_buckets, invalid, self.n_heads, ends, self.chunk)

    def forward(self, x: Tensor, k_cache: Tensor, v_cache: Tensor, span: Span) -> tuple[Tensor, Tensor, Tensor]:
        """x (B, T, D); k_cache, v_cache (B, H, L, D/H) from earlier frames; `span` of this step (Tk = L + T).

        Returns the output (B, T, D) and the new caches (B, H, L', D/H): the last W-1 frames' keys
        and values (all of them for full attention), of each row's real frames.
        """
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)  # 3x (B, H, T, D/H)
        k = torch.cat([k_cache, k], dim=2)  # (B, H, L + T, D/H)
        v = torch.cat([v_cache, v], dim=2)
        table = self.distance_bias
        if self.ahead_bias is not None:  # the distances -(C-1) .. -1 of the chunk it computes with now
            ahead = max(self.chunk - 1, 0)
            table = torch.cat([self.ahead_bias[:, self.ahead_bias.shape[1] - ahead:], table], 1)
        bias = table.t()[span.distance].permute(2, 0, 1) + span.mask  # (B, H, T, L + T)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype),  # no attention dropout: costly on CPU
                                           scale=1 / math.sqrt(self.head_dim))
        y = self.out(y.transpose(1, 2).reshape(B, T, D))
        if span.keep is not None:
            return y, take_rows(k, span.keep), take_rows(v, span.keep)
        if self.cache_size is not None:
            keep = k.shape[2] - self.cache_size
            k, v = k[:, :, max(keep, 0):], v[:, :, max(keep, 0):]
        return y, k, v
