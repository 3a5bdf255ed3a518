"""Streaming equals the whole-utterance forward; state stays bounded; the past never changes."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from asr.decoding.ctc import greedy_decode
from helpers import PRESETS, preset, stream_in_chunks, tiny_encoder

# front ends: strided Conv1d with factor S and kernel K, or stride-2 Conv2d layers (S=8: two, then pairs merged)
SUBSAMPLING = [dict(subsampling=1, subsampling_kernel=1), dict(subsampling=2, subsampling_kernel=4),
               dict(subsampling=4, subsampling_kernel=8), dict(subsampling=2, frontend="conv2d", frontend_channels=4),
               dict(subsampling=4, frontend="conv2d", frontend_channels=4),
               dict(subsampling=8, frontend="conv2d", frontend_channels=4)]


@settings(max_examples=12, deadline=None)
@given(preset_name=st.sampled_from(PRESETS), sub=st.sampled_from(SUBSAMPLING),
       sizes=st.lists(st.integers(1, 40), min_size=1, max_size=12), seed=st.integers(0, 3),
       conv_kernel=st.sampled_from([0, 1, 5]))
def test_chunked_equals_full(preset_name, sub, sizes, seed, conv_kernel):
    model = tiny_encoder(seed, **sub, conv_kernel=conv_kernel, **preset(preset_name))
    feats = torch.randn(1, 150, 80) * 3
    with torch.no_grad():
        full, _ = model(feats)
        streamed, _ = stream_in_chunks(model, feats, sizes)
    assert streamed.shape == full.shape
    torch.testing.assert_close(streamed, full, atol=1e-4, rtol=0)
    assert greedy_decode(streamed[0]) == greedy_decode(full[0])


def test_every_preset_and_factor_streams_exactly_frame_by_frame():
    for name in PRESETS:
        for sub in SUBSAMPLING:
            model = tiny_encoder(1, **sub, conv_kernel=3, **preset(name))
            feats = torch.randn(1, 50, 80)
            with torch.no_grad():
                full, _ = model(feats)
                streamed, _ = stream_in_chunks(model, feats, [1] * 49)
            torch.testing.assert_close(streamed, full, atol=1e-4, rtol=0, msg=f"{name} {sub}")


@settings(max_examples=10, deadline=None)
@given(sub=st.sampled_from(SUBSAMPLING), cut=st.integers(0, 99), window=st.sampled_from([1, 4, 16, None]),
       conv_kernel=st.sampled_from([0, 7]))
def test_causality_future_input_never_changes_past_output(sub, cut, window, conv_kernel):
    model = tiny_encoder(0, **sub, window=window, conv_kernel=conv_kernel)
    feats = torch.randn(1, 100, 80)
    changed = feats.clone()
    changed[:, cut:] = torch.randn(1, 100 - cut, 80) * 5
    with torch.no_grad():
        a, _ = model(feats)
        b, _ = model(changed)
    unaffected = cut // sub["subsampling"]  # encoder frame j reads feature frames up to (j+1)S - 1
    torch.testing.assert_close(a[:, :unaffected], b[:, :unaffected], atol=1e-6, rtol=0)
    if unaffected < a.shape[1]:
        assert not torch.allclose(a[:, unaffected:], b[:, unaffected:])


@pytest.mark.parametrize("frontend", [dict(subsampling_kernel=8), dict(frontend="conv2d", frontend_channels=4)])
def test_padded_batch_equals_each_utterance_alone(frontend):
    model = tiny_encoder(2, subsampling=4, window=6, conv_kernel=5, **frontend)
    lengths = [100, 37, 64]
    utts = [torch.randn(n, 80) for n in lengths]
    batch = torch.nn.utils.rnn.pad_sequence(utts, batch_first=True, padding_value=9.0)
    targets = [torch.randint(1, 16, (n // 20,)) for n in lengths]
    with torch.no_grad():
        out, out_lens = model(batch, torch.tensor(lengths))
        batch_loss = F.ctc_loss(out.transpose(0, 1), torch.nn.utils.rnn.pad_sequence(targets, batch_first=True),
                                out_lens, torch.tensor([len(t) for t in targets]), reduction="sum")
        alone_loss = 0.0
        for i, utt in enumerate(utts):
            alone, alone_len = model(utt[None])
            assert out_lens[i] == alone_len[0]
            torch.testing.assert_close(out[i, :out_lens[i]], alone[0], atol=1e-5, rtol=0)
            alone_loss += F.ctc_loss(alone[0], targets[i], alone_len, torch.tensor([len(targets[i])]), reduction="sum")
    torch.testing.assert_close(batch_loss, alone_loss, atol=1e-3, rtol=1e-5)


def test_state_after_an_hour_is_the_size_of_a_minute():
    model = tiny_encoder(0, subsampling=4, subsampling_kernel=8, window=16, conv_kernel=5)
    state = model.initial_state(1)
    chunk = torch.randn(1, 500, 80)  # 5 s
    sizes = {}
    with torch.no_grad():
        for i in range(1, 721):  # one hour
            _, state = model.step(chunk, state)
            if i in (12, 720):
                sizes[i] = (state.numel(), [tuple(k.shape) for k in state.keys + state.convs], state.frames.shape)
    assert sizes[12] == sizes[720]


def test_same_audio_same_output_after_an_hour_of_other_audio():
    model = tiny_encoder(3, subsampling=4, subsampling_kernel=8, window=10)
    speech = torch.randn(1, 400, 80)
    hour = torch.randn(1, 360000, 80)
    receptive = model.cfg.n_layers * (model.cfg.window - 1) + 2  # encoder frames to refill the context
    with torch.no_grad():
        fresh, _ = stream_in_chunks(model, speech, [50] * 7)
        state = model.initial_state(1)
        for start in range(0, hour.shape[1], 500):
            _, state = model.step(hour[:, start:start + 500], state)
        outs = []
        for start in range(0, 400, 50):
            logprobs, state = model.step(speech[:, start:start + 50], state)
            outs.append(logprobs)
        late = torch.cat(outs, 1)
    torch.testing.assert_close(late[:, receptive:], fresh[:, receptive:], atol=1e-4, rtol=0)
    assert not torch.allclose(late[:, :2], fresh[:, :2])  # the start did see the earlier audio


def test_step_many_batches_staggered_streams_exactly(model_path) -> None:
    """Streams that started at different times and send chunks of different lengths (different leftover
    frames, new frames and empty cache slots) go through the model in one call a pass, and each gets
    what `step` gives it alone."""
    from asr.model.recognizer import Recognizer

    recognizer = Recognizer.load(model_path)
    calls = []
    step_many = recognizer.model.step_many
    recognizer.model.step_many = lambda feats, states, final=False: calls.append(len(feats)) or step_many(feats, states, final)
    rng = np.random.default_rng(0)
    waves = [(0.1 * rng.standard_normal(8000 * 12)).astype(np.float32) for _ in range(6)]
    alone = [recognizer.initial_state() for _ in waves]
    together = [recognizer.initial_state() for _ in waves]
    sent = [0] * len(waves)
    for tick in range(12):
        live = [i for i in range(len(waves)) if tick >= i]  # stream i starts at pass i
        sizes = [int(rng.choice([8000, 8000, 1600, 320, 100, 0])) for _ in live]  # 100, 0: no new frame
        chunks = [waves[i][sent[i]:sent[i] + n] for i, n in zip(live, sizes)]
        calls.clear()
        batched = recognizer.step_many(chunks, [together[i] for i in live])
        assert calls == [len(live)]
        for i, chunk, (logprobs, state) in zip(live, chunks, batched):
            sent[i] += chunk.size
            recognizer.model.step_many = step_many  # the reference: each stream alone (`Encoder.step`)
            expected, alone[i] = recognizer.step(chunk, alone[i])
            recognizer.model.step_many = lambda feats, states, final=False: calls.append(len(feats)) or step_many(feats, states, final)
            together[i] = state
            assert logprobs.shape == expected.shape
            np.testing.assert_allclose(logprobs, expected, atol=1e-5)
