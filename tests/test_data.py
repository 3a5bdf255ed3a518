"""Training data: the feature cache returns what a fresh computation would, and never caches noise."""
from pathlib import Path

import numpy as np
import torch

from asr.training.data import AugmentConfig, SpeechDataset, warp_mel
from asr.manifest import Utterance
from asr.tokenizer import Tokenizer
from conftest import tone, write


def dataset(tmp_path: Path, cache: bool, **augment) -> SpeechDataset:
    path = write(tmp_path / "a.wav", tone(1.0))
    utts = [Utterance(audio=path, duration=1.0, text="A TONE")]
    no_masks = dict(time_masks=0, freq_masks=0)
    return SpeechDataset(utts, Tokenizer.train(["A TONE"], "char"), AugmentConfig(**{**no_masks, **augment}), cache)


def test_cached_features_equal_fresh_ones(tmp_path):
    cached = dataset(tmp_path, cache=True, speeds=[0.9], noise_prob=0.0)
    fresh = dataset(tmp_path, cache=False, speeds=[0.9], noise_prob=0.0)
    first, targets = cached[0]
    second, _ = cached[0]  # served from the cache
    assert list(cached.cache) == [(tmp_path / "a.wav", 0.9)]
    torch.testing.assert_close(second, first, atol=0.02, rtol=0)  # float16 storage
    torch.testing.assert_close(fresh[0][0], first)
    assert first.shape[0] == 109  # 0.9x speed: 16000 samples -> 17778 -> 1 + (17778 - 400) // 160 frames
    assert targets.tolist() == cached.tokenizer.encode("A TONE")


def test_noisy_features_are_never_cached(tmp_path):
    noisy = dataset(tmp_path, cache=True, speeds=[1.0], noise_prob=1.0, snr_db=[0.0, 0.0])
    a, _ = noisy[0]
    b, _ = noisy[0]
    assert not noisy.cache
    assert not torch.allclose(a, b)  # fresh noise each time


def test_mel_warp_moves_energy_and_identity_keeps_it():
    feats = torch.zeros(3, 80)
    feats[:, 20] = 1.0
    torch.testing.assert_close(warp_mel(feats, 1.0), feats)
    assert warp_mel(feats, 1.1)[0].argmax() == 22  # bin 22 reads from 20.0
    assert warp_mel(feats, 0.9)[0].argmax() == 18  # bin 18 reads from 20.0
    assert warp_mel(feats, 1.1).shape == feats.shape


def test_silence_is_appended_as_all_zero_audio_frames(tmp_path):
    ds = dataset(tmp_path, cache=False, speeds=[1.0], noise_prob=0.0, silence_prob=1.0, silence_seconds=0.3)
    zeros = torch.from_numpy(ds.fbank(np.zeros(16000, np.float32)))
    lengths = []
    for _ in range(10):
        feats, _ = ds[0]
        lengths.append(feats.shape[0])
        torch.testing.assert_close(feats[98:], zeros[: feats.shape[0] - 98])
    assert all(98 <= n <= 98 + 30 for n in lengths)  # 1 s -> 98 frames, then up to 30 silent ones
    assert max(lengths) > 98
