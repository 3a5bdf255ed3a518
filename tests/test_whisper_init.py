"""Whisper's encoder as the project's weights: the CTranslate2 reader (on a small file written here in that
format), the mapping onto `Encoder`, Whisper's front end made causal, and its log-mel features."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchaudio

from asr.audio.files import load_audio
from asr.features import Fbank, FbankConfig, stream_fbank
from asr.model.config import EncoderConfig
from asr.model.encoder import Encoder
from asr.training.acoustic.whisper.weights import encoder_shape, load_ct2, take_whisper
from helpers import SPEECHOCEAN, small_manifest

D, LAYERS, MELS = 12, 2, 80
CODES = {np.dtype(np.float32): 0, np.dtype(np.float16): 4, np.dtype(np.int32): 3}


def _string(text: str) -> bytes:
    data = text.encode() + b"\0"
    return struct.pack("<H", len(data)) + data


def write_ct2(path: Path, variables: dict[str, np.ndarray], aliases: dict[str, str], version: int = 6) -> None:
    """A CTranslate2 model file: version, spec name, revision, variables, aliases."""
    out = [struct.pack("<I", version), _string("WhisperSpec"), struct.pack("<I", 3), struct.pack("<I", len(variables))]
    for name, array in variables.items():
        out += [_string(name), struct.pack("<B", array.ndim), struct.pack(f"<{array.ndim}I", *array.shape),
                struct.pack("<B", CODES[array.dtype]), struct.pack("<I", array.nbytes), array.tobytes()]
    out.append(struct.pack("<I", len(aliases)))
    for alias, target in aliases.items():
        out += [_string(alias), _string(target)]
    path.write_bytes(b"".join(out))


def whisper_variables(seed: int = 0) -> dict[str, np.ndarray]:
    """A toy Whisper encoder in CTranslate2's names (fp16, as the packages ship it) plus a decoder tensor."""
    rng = np.random.default_rng(seed)

    def w(*shape):
        return (rng.standard_normal(shape) * 0.3).astype(np.float16)
    v = {"encoder/conv1/weight": w(D, MELS, 3), "encoder/conv1/bias": w(D),
         "encoder/conv2/weight": w(D, D, 3), "encoder/conv2/bias": w(D),
         "encoder/layer_norm/gamma": w(D), "encoder/layer_norm/beta": w(D),
         "decoder/embeddings/weight": w(7, D), "encoder/position_encodings/encodings": w(30, D).astype(np.float32)}
    for i in range(LAYERS):
        p = f"encoder/layer_{i}"
        v.update({f"{p}/self_attention/layer_norm/gamma": w(D), f"{p}/self_attention/layer_norm/beta": w(D),
                  f"{p}/self_attention/linear_0/weight": w(3 * D, D), f"{p}/self_attention/linear_0/bias": w(3 * D),
                  f"{p}/self_attention/linear_1/weight": w(D, D), f"{p}/self_attention/linear_1/bias": w(D),
                  f"{p}/ffn/layer_norm/gamma": w(D), f"{p}/ffn/layer_norm/beta": w(D),
                  f"{p}/ffn/linear_0/weight": w(4 * D, D), f"{p}/ffn/linear_0/bias": w(4 * D),
                  f"{p}/ffn/linear_1/weight": w(D, 4 * D), f"{p}/ffn/linear_1/bias": w(D)})
    return v


def whisper_shaped(**overrides) -> Encoder:
    cfg = dict(vocab_size=16, d_model=D, n_layers=LAYERS, n_heads=2, window=8, dropout=0.0, subsampling=2,
               frontend="whisper", features="whisper")
    return Encoder(EncoderConfig(**{**cfg, **overrides})).eval()


def test_reader_returns_every_variable_and_alias(tmp_path):
    variables = whisper_variables()
    write_ct2(tmp_path / "model.bin", variables, {"decoder/tied": "decoder/embeddings/weight"})
    read = load_ct2(tmp_path / "model.bin")
    assert set(read) == set(variables) | {"decoder/tied"}
    for name, array in variables.items():
        assert read[name].dtype == array.dtype and np.array_equal(read[name], array), name
    assert np.array_equal(read["decoder/tied"], variables["decoder/embeddings/weight"])
    assert encoder_shape(read) == {"d_model": D, "n_layers": LAYERS, "n_mels": MELS, "ff_mult": 4}
    # a model split into parts (as Whisper base ships) reads the same as the whole
    data = (tmp_path / "model.bin").read_bytes()
    (tmp_path / "a").write_bytes(data[:1000])
    (tmp_path / "b").write_bytes(data[1000:])
    split = load_ct2([tmp_path / "a", tmp_path / "b"])
    assert all(np.array_equal(split[k], read[k]) for k in read)


def test_bad_files_are_refused_with_a_reason(tmp_path):
    write_ct2(tmp_path / "old.bin", whisper_variables(), {}, version=2)
    with pytest.raises(ValueError, match="version 2"):
        load_ct2(tmp_path / "old.bin")
    write_ct2(tmp_path / "whole.bin", whisper_variables(), {})
    (tmp_path / "cut.bin").write_bytes((tmp_path / "whole.bin").read_bytes()[:5000])
    with pytest.raises(ValueError, match="truncated"):
        load_ct2(tmp_path / "cut.bin")


def test_weights_land_under_the_encoders_names(tmp_path):
    variables = whisper_variables()
    write_ct2(tmp_path / "model.bin", variables, {})
    encoder = whisper_shaped()
    taken = take_whisper(encoder, tmp_path / "model.bin")
    state = encoder.state_dict()
    assert set(state) - taken == {"ctc.weight", "ctc.bias"} | {f"blocks.{i}.attn.distance_bias" for i in range(LAYERS)}
    as_float = {k: torch.from_numpy(v.astype(np.float32)) for k, v in variables.items()}
    torch.testing.assert_close(state["blocks.1.attn.qkv.weight"], as_float["encoder/layer_1/self_attention/linear_0/weight"])
    torch.testing.assert_close(state["blocks.0.ff.3.bias"], as_float["encoder/layer_0/ffn/linear_1/bias"])
    torch.testing.assert_close(state["norm.weight"], as_float["encoder/layer_norm/gamma"])
    assert torch.equal(state["cmvn.mean"], torch.zeros(MELS)) and torch.equal(state["cmvn.std"], torch.ones(MELS))
    with pytest.raises(ValueError, match="model=whisper_tiny"):
        take_whisper(whisper_shaped(d_model=16), tmp_path / "model.bin")


def test_causal_front_end_is_whispers_one_frame_later(tmp_path):
    """Whisper's convolutions (padding 1 each) over the input delayed by one frame give exactly what the
    causal front end gives: the same weights, used the same way, never looking ahead."""
    variables = whisper_variables(1)
    write_ct2(tmp_path / "model.bin", variables, {})
    encoder = whisper_shaped()
    take_whisper(encoder, tmp_path / "model.bin")
    frames = torch.randn(1, 41, MELS)
    sub = encoder.subsampling
    ours = sub(torch.cat([torch.zeros(1, sub.left_context, MELS), frames], 1))  # (1, T', D)
    delayed = torch.cat([torch.zeros(1, 1, MELS), frames], 1).transpose(1, 2)
    x = F.gelu(F.conv1d(delayed, sub.conv1.weight, sub.conv1.bias, padding=1))
    theirs = F.gelu(F.conv1d(x, sub.conv2.weight, sub.conv2.bias, stride=2, padding=1)).transpose(1, 2)
    # frame 0 differs only in what pads the stream start (zero frames here, a zero conv1 output in Whisper), the
    # last ones by Whisper's right padding
    torch.testing.assert_close(ours[:, 1:19], theirs[:, 1:19], atol=1e-5, rtol=0)


def test_whisper_log_mel_matches_a_torch_reference_and_streams_exactly():
    cfg = FbankConfig.of("whisper")
    wave = np.random.default_rng(0).standard_normal(16000).astype(np.float32) * 0.1
    fbank = Fbank(cfg)
    ours = fbank(wave)
    spec = torch.stft(torch.from_numpy(wave), 400, 160, window=torch.hann_window(400), center=False,
                      return_complex=True).abs() ** 2  # (201, T)
    mel = torchaudio.functional.melscale_fbanks(201, 0.0, 8000.0, 80, 16000, norm="slaney", mel_scale="slaney")
    log = torch.clamp(mel.T @ spec, min=1e-10).log10().clamp(min=cfg.whisper_floor)
    np.testing.assert_allclose(ours, ((log + 4) / 4).T.numpy(), atol=2e-5, rtol=0)
    pending, pieces = np.zeros(0, np.float32), []
    for start in range(0, wave.size, 1234):
        new, pending = stream_fbank(fbank, wave[start:start + 1234], pending)
        pieces.append(new)
    np.testing.assert_allclose(np.concatenate(pieces), ours, atol=1e-5, rtol=0)  # as test_features does for fbank
    with pytest.raises(ValueError, match="features='mfcc'"):
        FbankConfig.of("mfcc")


@pytest.mark.skipif(not SPEECHOCEAN.exists(), reason=f"{SPEECHOCEAN} not found")
def test_a_whisper_initialised_lookahead_model_trains_and_streams_exactly(tmp_path):
    """init_from_whisper with model.chunk: a few steps on real audio; the exported model keeps Whisper's
    front end and its chunk, and the recognizer streams it exactly as it runs it whole."""
    from asr.model.loader import load_model
    from asr.model.recognizer import Recognizer
    from asr.model.torch_backend import load_torch
    from asr.training.acoustic.train import train
    from test_training import config

    write_ct2(tmp_path / "model.bin", whisper_variables(2), {})
    shape = dict(d_model=D, n_layers=LAYERS, n_heads=2, ff_mult=4, subsampling=2, frontend="whisper",
                 features="whisper", conv_kernel=0, window=16, chunk=4)
    cfg = config(tmp_path / "run", small_manifest(tmp_path, 4), *[f"model.{k}={v}" for k, v in shape.items()],
                 "trainer.max_steps=2", f"init_from_whisper={tmp_path / 'model.bin'}")
    assert cfg.data.features == "whisper"  # the data's frames follow the model
    path = train(cfg)
    encoder, _, _ = load_model(path)
    assert (encoder.cfg.features, encoder.cfg.chunk, encoder.cfg.frontend) == ("whisper", 4, "whisper")
    recognizer = Recognizer(*load_torch(path))
    wave = load_audio(json.loads(small_manifest(tmp_path, 1).read_text().splitlines()[0])["audio"])
    np.testing.assert_allclose(recognizer.run(wave, 1234), recognizer.offline_logprobs(wave), atol=1e-4, rtol=0)
    recognizer.check_chunk_ms(80)  # 4 frames of 20 ms
    with pytest.raises(ValueError, match="chunks of 80 ms"):
        recognizer.check_chunk_ms(50)


def test_a_causal_model_fine_tunes_with_lookahead(tmp_path):
    """init_from with init_chunk: every trained weight carries over; only the lookahead biases are new."""
    from asr.model.loader import random_model, save_model
    from asr.training.acoustic.config import OptimConfig
    from asr.training.acoustic.train import module_from_model

    encoder, tokenizer, _ = random_model(EncoderConfig(d_model=32, n_layers=2, n_heads=2, window=16))
    save_model(tmp_path / "m.safetensors", encoder, tokenizer)
    module = module_from_model(tmp_path / "m.safetensors", OptimConfig(), dropout=0.1, chunk=12)
    assert module.encoder.cfg.chunk == 12
    new = module.encoder.state_dict()
    for name, tensor in encoder.state_dict().items():
        assert torch.equal(new[name], tensor), name
    assert set(new) - set(encoder.state_dict()) == {"blocks.0.attn.ahead_bias", "blocks.1.attn.ahead_bias"}
