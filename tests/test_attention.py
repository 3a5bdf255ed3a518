"""The sliding-window causal mask is exactly 'frame t sees frames t-W+1 .. t'."""
import pytest
import torch

from asr.model.attention import SelfAttention, sliding_window_mask


@pytest.mark.parametrize("window", [1, 2, 5, 50, None])
@pytest.mark.parametrize("length", [1, 7, 64])
def test_mask_matches_definition(window, length):
    mask = sliding_window_mask(length, length, window)
    for t in range(length):
        for s in range(length):
            expected = s <= t and (window is None or s >= t - window + 1)
            assert mask[t, s].item() == expected, (t, s)


def test_mask_with_cache_hides_empty_slots():
    # 3 cache slots, the first 2 empty, then 4 new frames; window 4
    mask = sliding_window_mask(4, 7, window=4, invalid_keys=2)
    assert mask[:, :2].sum() == 0
    assert mask[0].tolist() == [False, False, True, True, False, False, False]
    assert mask[3].tolist() == [False, False, False, True, True, True, True]


@pytest.mark.parametrize("window", [1, 3, 16, None])
def test_cached_attention_equals_full(window):
    torch.manual_seed(0)
    attn = SelfAttention(d_model=16, n_heads=2, window=window, max_distance=8).eval()
    with torch.no_grad():
        attn.distance_bias.normal_()
    x = torch.randn(1, 30, 16)
    empty = torch.zeros(1, 2, 0, 8)
    none = torch.zeros(1, dtype=torch.long)
    full, _, _ = attn(x, empty, empty, attn.span(30, 30, none))
    k, v, outs = empty, empty, []
    for start in range(0, 30, 7):
        chunk = x[:, start:start + 7]
        y, k, v = attn(chunk, k, v, attn.span(chunk.shape[1], k.shape[2] + chunk.shape[1], none))
        outs.append(y)
        if window is not None:
            assert k.shape[2] <= window - 1
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-5, rtol=0)


def test_mask_per_row_empty_slots():
    # two streams in one batch: the first has 2 empty cache slots, the second none
    mask = sliding_window_mask(2, 5, window=None, invalid_keys=torch.tensor([2, 0]))
    assert mask.shape == (2, 2, 5)
    assert mask[0, 0].tolist() == [False, False, True, True, False]
    assert mask[1, 0].tolist() == [True, True, True, True, False]
