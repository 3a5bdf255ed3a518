"""Lookahead inside the chunk and Whisper's causal front end: streamed equals whole-utterance, exactly
as for causal models, and input after a chunk never changes that chunk's output."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from asr.model.attention import sliding_window_mask
from asr.model.config import EncoderConfig
from helpers import stream_in_chunks, tiny_encoder

FRONTENDS = [dict(subsampling=1, subsampling_kernel=1), dict(subsampling=4, frontend="conv2d", frontend_channels=4),
             dict(subsampling=2, frontend="whisper", features="whisper")]


def lookahead_encoder(seed: int, chunk: int, **overrides):
    return tiny_encoder(seed, chunk=chunk, **overrides)  # its lookahead biases random too


def test_mask_sees_its_own_chunk_and_the_window_before():
    allowed = sliding_window_mask(8, 8, window=3, chunk=4)
    expected = torch.tensor([[1, 1, 1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0, 0, 0],
                             [1, 1, 1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1, 1],
                             [0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(allowed, expected)


@settings(max_examples=12, deadline=None)
@given(front=st.sampled_from(FRONTENDS), chunk=st.sampled_from([1, 3, 8]),
       sizes=st.lists(st.integers(1, 40), min_size=1, max_size=10), seed=st.integers(0, 3),
       conv_kernel=st.sampled_from([0, 5]))
def test_chunked_equals_full_with_lookahead(front, chunk, sizes, seed, conv_kernel):
    model = lookahead_encoder(seed, chunk, conv_kernel=conv_kernel, **front)
    feats = torch.randn(1, 150, 80) * 3
    with torch.no_grad():
        full, _ = model(feats)
        pieces, _ = stream_in_chunks(model, feats, sizes)
    assert pieces.shape == full.shape
    torch.testing.assert_close(pieces, full, atol=1e-4, rtol=0)


def test_a_chunk_waits_until_it_fills_then_never_changes():
    model = lookahead_encoder(0, chunk=5)
    feats = torch.randn(1, 23, 80)
    with torch.no_grad():
        state, out = model.initial_state(), []
        for t in range(23):
            logprobs, state = model.step(feats[:, t:t + 1], state)
            assert logprobs.shape[1] == (5 if (t + 1) % 5 == 0 else 0)  # a whole chunk at once, or nothing
            out.append(logprobs)
        tail, _ = model.step(feats[:, :0], state, final=True)
        assert tail.shape[1] == 3  # the partial last chunk, at the end of the stream
        changed = feats.clone()
        changed[:, 10:] = torch.randn(1, 13, 80)
        before, _ = model(feats)
        after, _ = model(changed)
        later_in_chunk = feats.clone()
        later_in_chunk[:, 8] += 1.0
        ahead, _ = model(later_in_chunk)
    torch.testing.assert_close(before[:, :10], after[:, :10], atol=1e-5, rtol=0)  # chunks 0 and 1 are closed
    assert not torch.allclose(before[:, 5], ahead[:, 5])  # frame 5 looks ahead to frame 8 of its chunk


def test_rows_of_different_lengths_step_as_they_would_alone():
    model = lookahead_encoder(2, chunk=4, subsampling=2, frontend="whisper", features="whisper", conv_kernel=3)
    feats = [torch.randn(1, n, 80) for n in (9, 30, 17)]
    with torch.no_grad():
        states = [model.initial_state() for _ in feats]
        together = model.step_rows(feats, states)
        alone = [model.step(f, s) for f, s in zip(feats, states)]
        last = model.step_rows([f[:, :0] for f in feats], [s for _, s in together], final=True)
        last_alone = [model.step(f[:, :0], s, final=True) for f, (_, s) in zip(feats, alone)]
    for (a, _), (b, _) in zip(together + last, alone + last_alone):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_whisper_frontend_needs_its_subsampling_and_chunks_fit_the_window():
    with pytest.raises(ValueError, match="subsamples by 2"):
        EncoderConfig(frontend="whisper", subsampling=4).validate()
    with pytest.raises(ValueError, match="chunk=60"):
        EncoderConfig(window=50, chunk=60).validate()


def test_tools_refuse_a_step_shorter_than_the_models_chunk(tmp_path, capsys):
    from asr.model.loader import random_model, save_model
    from asr.stream import main as stream_main
    from helpers import ROOT

    encoder, tokenizer, _ = random_model(EncoderConfig(d_model=32, n_layers=1, n_heads=2, window=16, chunk=12))
    save_model(tmp_path / "m.safetensors", encoder, tokenizer)  # 12 frames of 40 ms: 480 ms chunks
    example = str(ROOT / "asr/examples/synthetic_slt.flac")
    args = ["--file", example, "--model", str(tmp_path / "m.safetensors"), "--greedy", "--plain"]
    assert stream_main([*args, "--chunk-ms", "200"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "looks ahead inside chunks of 480 ms" in err
    assert stream_main([*args, "--chunk-ms", "500", "--json"]) == 0
