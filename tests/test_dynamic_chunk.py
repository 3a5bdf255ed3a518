"""Dynamic chunk training: a model that holds lookahead biases for chunks of up to M frames computes at any
chunk up to M, streams exactly at it, keeps every bias through a saved file, and a training run draws its
chunk per batch while it validates and exports at the served one."""
from __future__ import annotations

import pytest
import torch

from asr.model.config import EncoderConfig
from asr.model.encoder import Encoder
from asr.model.loader import load_model, random_model, save_model
from asr.training.acoustic.config import OptimConfig
from asr.training.acoustic.train import module_from_model, train
from helpers import SPEECHOCEAN, small_manifest, stream_in_chunks
from test_lookahead import lookahead_encoder
from test_training import config


def test_a_shorter_chunk_uses_the_biases_of_its_own_distances():
    long = lookahead_encoder(0, chunk=8).set_chunk(3)
    short = Encoder(EncoderConfig(**{**vars(long.cfg), "max_chunk": 0}))
    state = {k: v[:, -2:] if k.endswith("ahead_bias") else v for k, v in long.state_dict().items()}
    short.load_state_dict(state)  # a model built for chunks of 3: the biases of distances -2 and -1
    feats = torch.randn(1, 90, 80)
    with torch.no_grad():
        torch.testing.assert_close(long.eval()(feats)[0], short.eval()(feats)[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("chunk", [0, 1, 4, 6])
def test_every_shorter_chunk_streams_exactly(chunk):
    model = lookahead_encoder(1, chunk=6, conv_kernel=3).set_chunk(chunk).eval()
    feats = torch.randn(1, 130, 80) * 3
    with torch.no_grad():
        full, _ = model(feats)
        pieces, _ = stream_in_chunks(model, feats, [7, 1, 19, 50, 3])
    torch.testing.assert_close(pieces, full, atol=1e-4, rtol=0)


def test_a_chunk_past_the_biases_is_refused_and_the_config_checks_its_bounds():
    model = lookahead_encoder(0, chunk=4)
    with pytest.raises(ValueError, match="up to 4 frames"):
        model.set_chunk(5)
    with pytest.raises(ValueError, match="max_chunk=20"):
        EncoderConfig(window=16, chunk=4, max_chunk=20).validate()
    with pytest.raises(ValueError, match="max_chunk=2"):
        EncoderConfig(window=16, chunk=4, max_chunk=2).validate()


def test_a_saved_shorter_chunk_keeps_the_longer_biases(tmp_path):
    model, tokenizer, _ = random_model(EncoderConfig(d_model=32, n_layers=2, n_heads=2, window=16, chunk=8))
    with torch.no_grad():
        for block in model.blocks:
            block.attn.ahead_bias.normal_(0, 1)
    feats = torch.randn(1, 120, 80)
    with torch.no_grad():
        at_8 = model(feats)[0]
        at_4 = model.set_chunk(4)(feats)[0]
    save_model(tmp_path / "m.safetensors", model, tokenizer)
    loaded = load_model(tmp_path / "m.safetensors")[0]
    assert (loaded.cfg.chunk, loaded.cfg.max_chunk) == (4, 8)
    with torch.no_grad():
        torch.testing.assert_close(loaded(feats)[0], at_4, atol=1e-5, rtol=0)
        torch.testing.assert_close(loaded.set_chunk(8)(feats)[0], at_8, atol=1e-5, rtol=0)
    assert not torch.allclose(at_4, at_8)


def test_a_file_with_shorter_biases_is_widened_with_zeros_for_the_new_distances(tmp_path):
    model, tokenizer, _ = random_model(EncoderConfig(d_model=32, n_layers=2, n_heads=2, window=16, chunk=3))
    with torch.no_grad():
        for block in model.blocks:
            block.attn.ahead_bias.normal_(0, 1)
    save_model(tmp_path / "m.safetensors", model, tokenizer)
    module = module_from_model(tmp_path / "m.safetensors", OptimConfig(), dropout=0.1, chunk=3, max_chunk=6)
    assert (module.encoder.cfg.chunk, module.encoder.cfg.max_chunk) == (3, 6)
    for old, new in zip(model.blocks, module.encoder.blocks):
        assert torch.equal(new.attn.ahead_bias[:, -2:], old.attn.ahead_bias)  # distances -2, -1 kept
        assert not new.attn.ahead_bias[:, :-2].any()  # -5 .. -3 new
    with pytest.raises(ValueError, match="chunks=\\[8\\]"):
        module.set_chunk_choices([8])


@pytest.mark.skipif(not SPEECHOCEAN.exists(), reason=f"{SPEECHOCEAN} not found")
def test_a_run_trains_at_the_drawn_chunks_and_exports_at_its_own(tmp_path):
    manifest = small_manifest(tmp_path, 4)
    cfg = config(tmp_path / "run", manifest, "trainer.max_steps=12", "trainer.check_val_every_n_epoch=100",
                 "optim.lr=3e-3", "optim.warmup_steps=2", "model.chunk=2", "chunks=[2,5]", "checkpoint_every_steps=12")
    encoder = load_model(train(cfg))[0]
    assert (encoder.cfg.chunk, encoder.cfg.max_chunk) == (2, 5)
    for block in encoder.blocks:  # the distances -4 .. -2 exist only in chunks of 5: they trained
        assert block.attn.ahead_bias[:, :3].abs().sum() > 0
