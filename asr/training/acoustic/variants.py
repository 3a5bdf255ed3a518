"""Pre-rendered augmentation variants: each training utterance's waveform augmentations, rendered once.

Speed, pitch, rooms, band-limiting and noise work on waveforms and cost about as much as the model's own
step on a 2-core CPU when drawn afresh for every batch. With `data.variants: K`, each training utterance is
rendered K ways before fitting (variant 0 clean at speed 1.0, the others drawn from the augmentation config
with a seed of their own) and its log-mel kept as a float16 .npy file; each time the utterance is drawn, the
dataset picks one variant at random and adds the cheap feature-level augmentations (mel warp, trailing
silence, SpecAugment) on top. Files are named by a hash of (audio file, variant, waveform augmentation
config), so a rerun or another run over the same audio reuses them.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import time
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import torch

from asr.training.acoustic.data import AugmentConfig, SpeechDataset, WaveAugment, draw_wave_augment

log = logging.getLogger("asr.training.acoustic.variants")
WAVE_FIELDS = ("speeds", "noise_prob", "snr_db", "pitch_prob", "pitch_semitones", "room_prob", "room_bank",
               "room_rt60", "room_seed", "bandlimit_prob", "bandlimit_low_pass_hz", "bandlimit_high_pass_hz")


def _digest(*parts: object) -> str:
    return hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest()


class VariantStore:
    """K rendered variants of each utterance's log-mel (T, F), as files under `root`."""

    def __init__(self, root: str | Path, count: int, augment: AugmentConfig, features: str = "fbank"):
        self.root, self.count, self.augment, self.features = Path(root), count, augment, features
        wave_config = {k: getattr(augment, k) for k in WAVE_FIELDS}  # a dataclass or Hydra's DictConfig
        if features != "fbank":  # another front end's frames are other files (fbank's keep their names)
            wave_config["features"] = features
        self.config_key = _digest(json.dumps(wave_config, sort_keys=True, default=list))[:12]

    def path(self, audio: Path, variant: int) -> Path:
        key = _digest(Path(audio).resolve(), variant, self.config_key)[:24]
        return self.root / key[:2] / f"{key}.npy"

    def draw(self, audio: Path, variant: int, rooms: int) -> tuple[float, float | None, WaveAugment]:
        """(speed, noise SNR in dB or None, waveform augmentation) of one variant: variant 0 is clean at
        speed 1.0, the others come from the config, seeded by the file's name and the variant number
        (the same draws on every machine), without touching the caller's random state."""
        if variant == 0:
            return 1.0, None, WaveAugment()
        aug, saved = self.augment, random.getstate()
        random.seed(_digest(Path(audio).parent.name, Path(audio).name, variant, self.config_key))
        try:
            speed = random.choice(aug.speeds)
            snr_db = random.uniform(*aug.snr_db) if random.random() < aug.noise_prob else None
            return speed, snr_db, draw_wave_augment(aug, rooms)
        finally:
            random.setstate(saved)

    def load(self, audio: Path, variant: int) -> torch.Tensor:
        """Log-mel (T, F) float32 of one variant (it must have been built)."""
        return torch.from_numpy(np.load(self.path(audio, variant))).float()

    def missing(self, audios: list[Path]) -> list[tuple[Path, int]]:
        return [(a, v) for a in audios for v in range(self.count) if not self.path(a, v).exists()]

    def build(self, audios: list[Path], workers: int) -> None:
        """Render every missing variant of `audios` with `workers` processes (atomic writes: resumable). Two
        builders over the same files (two runs starting at once) share the work: each takes the files in an
        order of its own and skips those the other has written."""
        todo = self.missing(sorted(set(audios)))
        random.Random(os.getpid()).shuffle(todo)
        if not todo:
            return
        log.info("rendering %d augmentation variants (%d files x %d) into %s with %d processes", len(todo),
                 len(set(audios)), self.count, self.root, workers)
        start, done = time.monotonic(), 0
        with get_context("fork").Pool(workers, initializer=_start_worker, initargs=(self,)) as pool:
            for _ in pool.imap_unordered(_render, todo, chunksize=8):
                done += 1
                if done % max(len(todo) // 10, 1) == 0:
                    log.info("variants: %d/%d (%.0f s)", done, len(todo), time.monotonic() - start)
        log.info("variants rendered in %.0f s", time.monotonic() - start)


_worker: tuple[VariantStore, SpeechDataset] | None = None


def _start_worker(store: VariantStore) -> None:
    global _worker
    torch.set_num_threads(1)
    _worker = store, SpeechDataset([], None, store.augment, features=store.features)  # its front end and rooms


def _render(job: tuple[Path, int]) -> None:
    store, dataset = _worker
    audio, variant = job
    path = store.path(audio, variant)
    if path.exists():  # another builder's
        return
    speed, snr_db, wave_aug = store.draw(audio, variant, len(dataset.rooms))
    torch.manual_seed(int(_digest(audio, variant)[:8], 16))  # the noise, when a variant has some
    feats = dataset.features(audio, speed, snr_db, wave_aug).numpy().astype(np.float16)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.stem}.{os.getpid()}.npy")
    np.save(partial, feats)
    os.replace(partial, path)
