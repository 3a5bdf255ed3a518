"""Training data: the feature cache returns what a fresh computation would, and never caches noise;
the speaker and room augmentations change the audio as they should, are seeded and off by default."""
import math
import random
from pathlib import Path

import numpy as np
import torch

from asr.training.acoustic.data import (AugmentConfig, SpeechDataset, band_limit, draw_wave_augment, pitch_shift, reverberate, room_bank, warp_mel)
from asr.corpus.manifest import Utterance
from asr.text.tokenizer import Tokenizer
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


# ---------------------------------------------------------------- speaker and room augmentation

SR = 16000


def _spectrum(wave: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(frequencies in Hz, power) of a 1-D wave."""
    return torch.fft.rfftfreq(wave.numel(), 1 / SR), torch.fft.rfft(wave).abs().square()


def test_new_augmentations_are_off_by_default_and_draw_no_random_numbers(tmp_path):
    cfg = AugmentConfig()
    assert cfg.pitch_prob == cfg.room_prob == cfg.bandlimit_prob == 0.0 and cfg.mel_warp == 0.0
    random.seed(3)
    state = random.getstate()
    assert not draw_wave_augment(cfg, rooms=8)
    assert random.getstate() == state  # existing configs see the same random sequence as before
    ds = dataset(tmp_path, cache=True, speeds=[1.0], noise_prob=0.0)
    assert ds.rooms == []  # no room bank unless rooms are on
    ds[0]
    assert list(ds.cache) == [(tmp_path / "a.wav", 1.0)]  # clean: still cached


def test_pitch_shift_moves_a_tone_and_keeps_the_duration():
    t = torch.arange(2 * SR) / SR
    wave = torch.sin(2 * math.pi * 440 * t)
    for semitones in (-3.0, 2.0):
        shifted = pitch_shift(wave, semitones)
        assert shifted.shape == wave.shape
        freqs, power = _spectrum(shifted[SR // 4: -SR // 4])
        peak = freqs[power.argmax()].item()
        assert abs(12 * math.log2(peak / 440) - semitones) < 0.15, peak
    torch.testing.assert_close(pitch_shift(wave, 0.0), wave)


def test_band_limit_removes_energy_above_the_cutoff_and_below_the_high_pass():
    wave = torch.from_numpy(np.random.default_rng(0).standard_normal(2 * SR).astype(np.float32)) * 0.1
    freqs, before = _spectrum(wave)
    limited = band_limit(wave, 300.0, 3400.0)
    _, after = _spectrum(limited)
    assert limited.shape == wave.shape
    above = freqs > 3900  # the resampler's transition band ends about 15% above the cutoff
    assert after[above].sum() < 1e-3 * before[above].sum()  # white noise had half its power there
    low = freqs < 60
    assert after[low].sum() < 0.1 * before[low].sum()
    mid = (freqs > 800) & (freqs < 3000)
    assert after[mid].sum() > 0.8 * before[mid].sum()  # the speech band passes


def test_room_bank_is_seeded_and_adds_a_decaying_tail():
    bank = room_bank(3, [0.3, 0.6], seed=1)
    again = room_bank(3, [0.3, 0.6], seed=1)
    assert len(bank) == 3 and all(torch.equal(a, b) for a, b in zip(bank, again))
    assert not torch.equal(room_bank(1, [0.3, 0.6], seed=2)[0], bank[0])
    burst = torch.zeros(SR)
    burst[: SR // 2] = torch.from_numpy(tone(0.5))
    wet = reverberate(burst, bank[0])
    assert wet.numel() == burst.numel() + bank[0].numel() - 1
    tail = wet[SR // 2:]  # the dry signal is silent here
    energy = [tail[i: i + 1600].square().sum().item() for i in range(0, 4800, 1600)]
    assert energy[0] > 1e-3 * burst[: SR // 2].square().sum() and energy[0] > energy[1] > energy[2]
    assert abs(wet.abs().max() - burst.abs().max()) < 1e-5


def test_wave_augmentations_are_deterministic_under_a_seed_and_never_cached(tmp_path):
    on = dict(speeds=[1.0], noise_prob=0.0, pitch_prob=1.0, room_prob=1.0, room_bank=4, bandlimit_prob=1.0)
    ds = dataset(tmp_path, cache=True, **on)
    assert len(ds.rooms) == 4
    clean = dataset(tmp_path, cache=False, speeds=[1.0], noise_prob=0.0)[0][0]
    random.seed(7)
    a = ds[0][0]
    random.seed(7)
    b = ds[0][0]
    torch.testing.assert_close(a, b)
    assert not ds.cache
    assert a.shape[0] > clean.shape[0]  # the room's tail
    assert not torch.allclose(a[: clean.shape[0]], clean, atol=0.5)
    random.seed(8)
    assert not torch.allclose(ds[0][0][: clean.shape[0]], a[: clean.shape[0]])
    # each one alone changes the features; a room bank from the same seed is the same in a new dataset
    for only in (dict(pitch_prob=1.0), dict(room_prob=1.0, room_bank=2), dict(bandlimit_prob=1.0)):
        feats = dataset(tmp_path, cache=False, speeds=[1.0], noise_prob=0.0, **only)[0][0]
        assert not torch.allclose(feats[: clean.shape[0]], clean, atol=0.1), only
    assert all(torch.equal(x, y) for x, y in zip(dataset(tmp_path, cache=False, **on).rooms, ds.rooms))
