"""A model that normalises with a running mean (asr.model.normalise): streamed == whole-utterance, a level change
is removed as the stream goes on, and the torch, numpy and ONNX paths agree."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from asr.model.export import export_onnx
from asr.model.normalise import running_norm
from asr.model.onnx_backend import load_onnx
from asr.model.torch_backend import TorchModel
from asr.text.tokenizer import Tokenizer
from helpers import stream_in_chunks, tiny_encoder

DB = np.log(10) / 10  # a gain of one dB adds this to every natural-log power bin


def running_encoder(seed: int = 0, **overrides):
    model = tiny_encoder(seed, subsampling=4, subsampling_kernel=8, norm="running", norm_prior=20, norm_horizon=60,
                         **overrides)
    with torch.no_grad():
        model.cmvn.set_stats(torch.linspace(-8, -2, 80), torch.linspace(1.5, 3.0, 80))
    return model


def test_numpy_running_norm_chunked_is_bit_equal_to_whole():
    rng = np.random.default_rng(0)
    feats = (rng.standard_normal((500, 80)) * 3 - 5).astype(np.float32)
    start = np.full(80, -4.0, np.float32)
    whole, whole_mean = running_norm(feats, start, 0, 100, 300)
    pieces, mean, count = [], start, 0
    for size in [1, 7, 50, 2, 140, 300]:
        out, mean = running_norm(feats[count:count + size], mean, count, 100, 300)
        pieces.append(out)
        count += size
    assert np.array_equal(np.concatenate(pieces), whole) and np.array_equal(mean, whole_mean)


def test_a_level_change_is_removed_as_the_stream_goes_on():
    rng = np.random.default_rng(1)
    feats = (rng.standard_normal((1000, 80)) - 5).astype(np.float32)
    start = np.full(80, -5.0, np.float32)
    loud, _ = running_norm(feats, start, 0, 100, 300)
    quiet, _ = running_norm(feats - 25 * DB, start, 0, 100, 300)  # the same speech 25 dB quieter
    left = np.abs(quiet - loud).mean(axis=1) / (25 * DB)  # the share of the shift still there, frame by frame
    assert left[0] > 0.98 and left[99] == pytest.approx(0.5, abs=0.01)  # a prior worth 100 frames: half at 1 s
    assert left[400] < 0.2 and left[-1] < 0.03 and np.all(np.diff(left) <= 1e-6)


@pytest.mark.parametrize("sizes", [[1] * 30, [13, 50, 7], [200]])
def test_torch_streamed_equals_whole_with_a_running_mean(sizes):
    model = running_encoder(3, window=12, conv_kernel=3)
    feats = torch.randn(2, 260, 80) * 2 - 5
    with torch.no_grad():
        full, _ = model(feats)
        streamed, state = stream_in_chunks(model, feats, sizes)
    torch.testing.assert_close(streamed, full, atol=1e-5, rtol=0)
    assert state.norm_count.tolist() == [260, 260]


def test_torch_running_mean_matches_numpy():
    model = running_encoder()
    feats = torch.randn(1, 120, 80) - 6
    state = model.initial_state(1)
    normed, state = model.normalise(feats, state)
    centred, mean = running_norm(feats[0].numpy(), model.cmvn.mean.numpy(), 0, 20, 60)
    np.testing.assert_allclose(normed[0].numpy(), centred / model.cmvn.std.numpy(), atol=1e-5)
    np.testing.assert_allclose(state.norm_mean[0].numpy(), mean, atol=1e-5)


def test_step_rows_keep_each_streams_running_mean():
    model = running_encoder(4, window=10)
    a, b = torch.randn(1, 90, 80) - 3, torch.randn(1, 40, 80) - 9
    with torch.no_grad():
        alone = [model(x)[0] for x in (a, b)]
        states = [model.initial_state(1), model.initial_state(1)]
        rows = model.step_rows([a, b], states, final=True)
    for (logprobs, state), expected, x in zip(rows, alone, (a, b)):
        torch.testing.assert_close(logprobs, expected, atol=1e-5, rtol=0)
        assert state.norm_count.item() == x.shape[1]


def test_onnx_streams_a_running_mean_model_as_torch_does(tmp_path):
    model = running_encoder(5, window=12)
    export_onnx(model, Tokenizer("char"), {}, tmp_path)
    onnx_model, _, _ = load_onnx(tmp_path)
    torch_model = TorchModel(model)
    feats = (np.random.default_rng(2).standard_normal((2, 330, 80)) * 2 - 5).astype(np.float32)
    expected, _ = torch_model.step(feats, torch_model.initial_state(2), final=True)
    for chunk in (50, 13):
        state, outs = onnx_model.initial_state(2), []
        for start in range(0, 330, chunk):
            out, state = onnx_model.step(feats[:, start:start + chunk], state, final=start + chunk >= 330)
            outs.append(out)
        np.testing.assert_allclose(np.concatenate(outs, axis=1), expected, atol=1e-4, rtol=0)
        assert state["norm_count"].tolist() == [330, 330]
