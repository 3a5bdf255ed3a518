"""Multi-head self-attention under a sliding-window causal mask, with an explicit key/value cache.

Frame t attends to frames t-W+1 .. t (W = window; window=None means full causal attention).
Position enters only as a learned per-head bias over the distance t - s (0 .. W-1), so the
output never depends on where in the stream a frame sits: minute 100 behaves like minute 1.

The same `forward` serves training (empty cache, whole utterance) and streaming (the cache
holds the last W-1 frames' keys and values from earlier chunks). Padding in a batch is
always at the end of an utterance, so under a causal mask a real frame never sees a padded
key: each utterance's outputs equal those it gets alone.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def sliding_window_mask(num_queries: int, num_keys: int, window: int | None, invalid_keys: int | Tensor = 0,
                        device: torch.device | None = None) -> Tensor:
    """Boolean mask, True where query i may attend key j: (Tq, Tk), or (B, Tq, Tk) for per-row `invalid_keys`.

    The queries are the last Tq of the Tk key frames (the first Tk - Tq keys come from the cache),
    and the first `invalid_keys` cache slots (an int, or a (B,) tensor: one count per stream) hold
    nothing yet. distance = (Tk - Tq + i) - j.
    """
    q = torch.arange(num_queries, device=device)[:, None] + (num_keys - num_queries)
    k = torch.arange(num_keys, device=device)[None, :]
    distance = q - k
    invalid = torch.as_tensor(invalid_keys, device=device)[..., None, None]  # () or (B,) -> (..., 1, 1)
    allowed = (distance >= 0) & (k >= invalid)
    if window is not None:
        allowed = allowed & (distance < window)
    return allowed


def last_frames(seq: Tensor, ends: Tensor, count: int) -> Tensor:
    """seq (B, C, L + T, ...) holding `count` = L frames of cache then T new ones, of which row b's
    first ends[b] are real -> (B, C, count, ...): each row's last `count` frames up to its real end."""
    if count == 0:  # a window of 1 carries no cache
        return seq[:, :, :0]
    index = ends[:, None] + torch.arange(count, device=seq.device)  # (B, count): row b's frames ends[b] ..
    index = index.view(seq.shape[0], 1, count, *([1] * (seq.dim() - 3))).expand(-1, seq.shape[1], -1, *seq.shape[3:])
    return seq.gather(2, index)  # a gather, not unfold: the same op in eager torch and in the ONNX graph


class SelfAttention(nn.Module):
    """Sliding-window causal multi-head self-attention with a relative-distance bias."""

    def __init__(self, d_model: int, n_heads: int, window: int | None, max_distance: int):
        super().__init__()
        self.n_heads, self.window = n_heads, window
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.num_buckets = window if window is not None else max_distance
        self.distance_bias = nn.Parameter(torch.zeros(n_heads, self.num_buckets))  # (H, buckets)

    @property
    def cache_size(self) -> int | None:
        """Frames of keys/values carried to the next chunk (None: unbounded, full attention)."""
        return None if self.window is None else self.window - 1

    def forward(self, x: Tensor, k_cache: Tensor, v_cache: Tensor, invalid: Tensor,
                ends: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """x (B, T, D); k_cache, v_cache (B, H, L, D/H) from earlier frames; invalid (B,): how many of
        each row's leading cache slots are still empty (rows are independent streams); ends (B,), if
        given: each row's real frames, the rest of its T being padding (streaming, L = W-1 only).

        Returns the output (B, T, D) and the new caches (B, H, L', D/H): the last W-1 frames' keys
        and values (all of them for full attention), of each row's real frames.
        """
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, D // self.n_heads).permute(2, 0, 3, 1, 4)  # 3x (B, H, T, D/H)
        k = torch.cat([k_cache, k], dim=2)  # (B, H, L + T, D/H)
        v = torch.cat([v_cache, v], dim=2)
        allowed = sliding_window_mask(T, k.shape[2], self.window, invalid, device=x.device)  # (B, T, L + T)
        bias = self.relative_bias(T, k.shape[2], x.device).masked_fill(~allowed[:, None], float("-inf"))  # (B, H, T, L + T)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype))  # no attention dropout: costly on CPU
        y = self.out(y.transpose(1, 2).reshape(B, T, D))
        if ends is not None:
            return y, last_frames(k, ends, self.cache_size), last_frames(v, ends, self.cache_size)
        if self.cache_size is not None:
            keep = k.shape[2] - self.cache_size
            k, v = k[:, :, max(keep, 0):], v[:, :, max(keep, 0):]
        return y, k, v

    def relative_bias(self, num_queries: int, num_keys: int, device: torch.device) -> Tensor:
        """(H, Tq, Tk) learned bias for each query-key distance (clamped to the last bucket)."""
        q = torch.arange(num_queries, device=device)[:, None] + (num_keys - num_queries)
        distance = (q - torch.arange(num_keys, device=device)[None, :]).clamp(0, self.num_buckets - 1)
        return self.distance_bias[:, distance]
