"""Training data: manifests -> augmented log-mel batches, bucketed by duration.

Augmentation (training only): speed perturbation, additive coloured noise at a random SNR,
a random warp of the mel axis (a cheap stand-in for other vocal tracts), digital silence after the
speech (what `Recognizer.finish` appends at the end of every input), and SpecAugment time/frequency
masks on the log-mel frames.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from pathlib import Path

import lightning as L
import numpy as np
import torch
import torchaudio
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, Sampler

from asr.audio import SAMPLE_RATE, load_audio, resample
from asr.features import Fbank
from asr.manifest import Utterance, read_manifest
from asr.text import normalize
from asr.tokenizer import Tokenizer


@dataclass
class SourceConfig:
    manifest: str = "???"
    split: str = ""  # keep only rows of this "split" (e.g. FSDD's train/test) and rows without one
    repeat: int = 1  # how many times each utterance appears per epoch


@dataclass
class AugmentConfig:
    speeds: list[float] = field(default_factory=lambda: [0.9, 1.0, 1.1])
    noise_prob: float = 0.5
    snr_db: list[float] = field(default_factory=lambda: [5.0, 35.0])
    time_masks: int = 2
    time_mask_frames: int = 40
    freq_masks: int = 2
    freq_mask_bins: int = 15
    mel_warp: float = 0.0  # stretch the mel axis by a random factor in [1 - mel_warp, 1 + mel_warp]
    silence_prob: float = 0.0  # share of utterances followed by digital silence ...
    silence_seconds: float = 0.4  # ... of a random length up to this


@dataclass
class DataConfig:
    root: str = "../shared/data"
    train: list[SourceConfig] = field(default_factory=list)
    valid: list[SourceConfig] = field(default_factory=list)
    max_duration: float = 20.0  # longer training utterances are skipped
    max_batch_seconds: float = 240.0  # audio per batch
    num_workers: int = 1
    cache_features: bool = True  # keep each (utterance, speed)'s log-mel in the loader's memory (float16)
    augment: AugmentConfig = field(default_factory=AugmentConfig)


def load_sources(sources: list[SourceConfig], max_duration: float = math.inf) -> list[Utterance]:
    utterances = []
    for source in sources:
        rows = [u for u in read_manifest(source.manifest, source.split) if u.duration <= max_duration]
        utterances += rows * source.repeat
    return utterances


def add_noise(wave: Tensor, snr_db: float) -> Tensor:
    """Add noise with a random spectral tilt (white to brown) at `snr_db`."""
    noise = torch.randn_like(wave)
    tilt = random.uniform(0.0, 0.98)
    if tilt > 0:
        noise = torchaudio.functional.lfilter(noise, torch.tensor([1.0, -tilt]), torch.tensor([1.0, 0.0]), clamp=False)
    signal_power = wave.square().mean().clamp_min(1e-8)
    noise_power = noise.square().mean().clamp_min(1e-8)
    return wave + noise * torch.sqrt(signal_power / noise_power / 10 ** (snr_db / 10))


def spec_augment(feats: Tensor, cfg: AugmentConfig) -> Tensor:
    """Mask random time spans and mel bands of (T, F) with the utterance mean."""
    feats = feats.clone()
    fill = feats.mean()
    T, F = feats.shape
    for _ in range(cfg.freq_masks):
        width = random.randint(0, cfg.freq_mask_bins)
        start = random.randint(0, max(F - width, 0))
        feats[:, start:start + width] = fill
    for _ in range(cfg.time_masks):
        width = random.randint(0, min(cfg.time_mask_frames, T // 5))
        start = random.randint(0, max(T - width, 0))
        feats[start:start + width] = fill
    return feats


def warp_mel(feats: Tensor, factor: float) -> Tensor:
    """Stretch (T, F) along F by `factor` (> 1 moves energy to higher bands), interpolating linearly."""
    F = feats.shape[1]
    source = (torch.arange(F, dtype=feats.dtype) / factor).clamp(max=F - 1)
    low = source.floor().long()
    high = (low + 1).clamp(max=F - 1)
    weight = source - low
    return feats[:, low] * (1 - weight) + feats[:, high] * weight


class SpeechDataset(Dataset):
    """Utterance i -> (log-mel (T, F), token ids (U,))."""

    def __init__(self, utterances: list[Utterance], tokenizer: Tokenizer, augment: AugmentConfig | None,
                 cache: bool = False):
        self.utterances, self.tokenizer, self.augment = utterances, tokenizer, augment
        self.fbank = Fbank()
        self.silent_frame = torch.from_numpy(self.fbank(np.zeros(self.fbank.cfg.win_length, np.float32)))  # (1, F)
        self.cache: dict[tuple[Path, float], Tensor] | None = {} if cache else None

    def features(self, audio: Path, speed: float, snr_db: float | None) -> Tensor:
        """Log-mel (T, F) of `audio` played at `speed`, with noise at `snr_db` (None: clean).

        Clean features are cached (as float16) when caching is on: decoding and resampling then
        happen once per (utterance, speed) instead of once per epoch."""
        key, cacheable = (audio, speed), snr_db is None and self.cache is not None
        if cacheable and key in self.cache:
            return self.cache[key].float()
        wave = load_audio(audio)
        if speed != 1.0:  # play faster/slower: resample as if recorded at rate * speed
            wave = resample(wave, int(SAMPLE_RATE * speed), SAMPLE_RATE)
        wave = torch.from_numpy(wave)
        if snr_db is not None:
            wave = add_noise(wave, snr_db)
        feats = torch.from_numpy(self.fbank(wave.numpy()))
        if cacheable:
            self.cache[key] = feats.half()
        return feats

    def __len__(self) -> int:
        return len(self.utterances)

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        utt, aug = self.utterances[index], self.augment
        if aug is None:
            feats = self.features(utt.audio, 1.0, None)
        else:
            snr_db = random.uniform(*aug.snr_db) if random.random() < aug.noise_prob else None
            feats = self.features(utt.audio, random.choice(aug.speeds), snr_db)
            if aug.mel_warp > 0:
                feats = warp_mel(feats, random.uniform(1 - aug.mel_warp, 1 + aug.mel_warp))
            if random.random() < aug.silence_prob:
                frames = round(random.uniform(0, aug.silence_seconds) * 100)
                feats = torch.cat([feats, self.silent_frame.expand(frames, -1)])
            feats = spec_augment(feats, aug)
        return feats, torch.tensor(self.tokenizer.encode(normalize(utt.text)), dtype=torch.long)


def collate(batch: list[tuple[Tensor, Tensor]]) -> dict[str, Tensor]:
    """Pad to the longest item: feats (B, T, F), feat_lens (B,), targets (B, U), target_lens (B,)."""
    feats, targets = zip(*batch)
    return {"feats": torch.nn.utils.rnn.pad_sequence(feats, batch_first=True),
            "feat_lens": torch.tensor([f.shape[0] for f in feats]),
            "targets": torch.nn.utils.rnn.pad_sequence(targets, batch_first=True),
            "target_lens": torch.tensor([t.numel() for t in targets])}


class BucketBatchSampler(Sampler[list[int]]):
    """Batches of similar duration holding at most `max_seconds` of audio, reshuffled each epoch.

    Under DDP each rank takes every world_size-th batch of the same epoch-seeded order.
    """

    def __init__(self, durations: list[float], max_seconds: float, shuffle: bool, seed: int = 0):
        self.durations, self.max_seconds, self.shuffle, self.seed = durations, max_seconds, shuffle, seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _batches(self) -> list[list[int]]:
        rng = random.Random(self.seed + self.epoch)
        order = sorted(range(len(self.durations)), key=lambda i: (self.durations[i], rng.random()))
        batches, batch, longest = [], [], 0.0
        for i in order:
            longest = max(longest, self.durations[i])
            if batch and longest * (len(batch) + 1) > self.max_seconds:
                batches.append(batch)
                batch, longest = [], self.durations[i]
            batch.append(i)
        if batch:
            batches.append(batch)
        if self.shuffle:
            rng.shuffle(batches)
        rank, world = 0, 1
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
        return batches[rank::world]

    def __iter__(self):
        return iter(self._batches())

    def __len__(self) -> int:
        return len(self._batches())


class SpeechDataModule(L.LightningDataModule):
    def __init__(self, cfg: DataConfig, tokenizer: Tokenizer):
        super().__init__()
        self.cfg, self.tokenizer = cfg, tokenizer
        self.train_utts = load_sources(cfg.train, cfg.max_duration)
        self.valid_utts = load_sources(cfg.valid)

    def _loader(self, utts: list[Utterance], train: bool) -> DataLoader:
        dataset = SpeechDataset(utts, self.tokenizer, self.cfg.augment if train else None, self.cfg.cache_features)
        sampler = BucketBatchSampler([u.duration for u in utts], self.cfg.max_batch_seconds, shuffle=train)
        return DataLoader(dataset, batch_sampler=sampler, collate_fn=collate, num_workers=self.cfg.num_workers,
                          persistent_workers=self.cfg.num_workers > 0)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_utts, train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.valid_utts, train=False)
