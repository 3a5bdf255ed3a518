"""Training data: manifests -> augmented log-mel batches, bucketed by duration.

Augmentation (training only): speed perturbation, additive coloured noise at a random SNR,
a random warp of the mel axis (vocal-tract-length perturbation, VTLP-like: a cheap stand-in for other
vocal tracts), digital silence after the speech (what `Recognizer.finish` appends at the end of every
input), and SpecAugment time/frequency masks on the log-mel frames. Off by default (each with its own
probability in AugmentConfig): pitch shift with the duration kept, simulated rooms (a seeded bank of
pyroomacoustics impulse responses made when the dataset starts), phone/laptop band-limiting, and the
channels of `asr.training.acoustic.channel_augment` (level, codecs, real rooms, microphones and noise, other talkers,
noise-only examples with empty transcripts).
"""
from __future__ import annotations

import logging
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Protocol

import numpy as np
import torch
import torchaudio
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, Sampler

from asr.audio import SAMPLE_RATE
from asr.audio.files import load_audio
from asr.audio.resample import resample
from asr.corpus.manifest import Utterance, read_manifest, skipped_note
from asr.features import Fbank, FbankConfig
from asr.text.normalize import normalize
from asr.text.tokenizer import Tokenizer
from asr.training.acoustic.channel_augment import ChannelAugment, ChannelConfig, enabled as channel_enabled
from asr.training.acoustic.pronunciations import Alternatives, targets_and_alternatives

if TYPE_CHECKING:
    from asr.training.acoustic.whisper.teacher import TeacherCache

log = logging.getLogger("asr.training.acoustic.data")


@dataclass
class SourceConfig:
    manifest: str = "???"
    split: str = ""  # keep only rows of this "split" (e.g. FSDD's train/test) and rows without one
    repeat: int = 1  # how many times each utterance appears per epoch
    speakers_out: list[str] = field(default_factory=list)  # rows of these speakers are left out (held out)


@dataclass
class AugmentConfig:
    speeds: list[float] = field(default_factory=lambda: [0.9, 1.0, 1.1])
    noise_prob: float = 0.5
    snr_db: list[float] = field(default_factory=lambda: [5.0, 35.0])
    time_masks: int = 2
    time_mask_frames: int = 40
    freq_masks: int = 2
    freq_mask_bins: int = 15
    mel_warp: float = 0.0  # VTLP-like: stretch the mel axis by a random factor in [1 - mel_warp, 1 + mel_warp]
    silence_prob: float = 0.0  # share of utterances followed by digital silence ...
    silence_seconds: float = 0.4  # ... of a random length up to this
    pitch_prob: float = 0.0  # share of utterances pitch-shifted (duration kept) ...
    pitch_semitones: float = 3.0  # ... by a random amount in [-this, +this]
    room_prob: float = 0.0  # share of utterances played in a simulated room: ...
    room_bank: int = 64  # ... one of this many pyroomacoustics impulse responses, made when the dataset starts ...
    room_rt60: list[float] = field(default_factory=lambda: [0.15, 0.8])  # ... with reverberation times in this range (s) ...
    room_seed: int = 0  # ... from this seed
    bandlimit_prob: float = 0.0  # share of utterances band-limited like a phone or laptop microphone: ...
    bandlimit_low_pass_hz: list[float] = field(default_factory=lambda: [3400.0, 7000.0])  # ... cut above this ...
    bandlimit_high_pass_hz: list[float] = field(default_factory=lambda: [50.0, 300.0])  # ... and below this
    channel: ChannelConfig = field(default_factory=ChannelConfig)  # level, codecs, real rooms and noise, other
    # talkers and noise-only examples, drawn on the fly (asr.training.acoustic.channel_augment; off by default)


@dataclass
class DataConfig:
    root: str = "../shared/data"
    train: list[SourceConfig] = field(default_factory=list)
    valid: list[SourceConfig] = field(default_factory=list)
    max_duration: float = 20.0  # longer training utterances are skipped
    skip_bad: bool = False  # a manifest line without usable text (or otherwise bad) is left out, and counted in
    # the log, instead of stopping the run with its file and line (data.skip_bad=true; asr.evaluate's --skip-bad)
    max_batch_seconds: float = 240.0  # audio per batch
    num_workers: int = 1
    cache_features: bool = True  # keep each (utterance, speed)'s log-mel in the loader's memory (float16)
    variants: int = 0  # > 0: render this many waveform-augmentation variants of each training utterance once,
    variants_dir: str = "data/variants"  # ... here, before fitting (asr/training/acoustic/variants.py)
    variants_workers: int = 2  # processes that render them
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    features: str = "fbank"  # the model's feature front end (conf/train.yaml sets it from model.features)


def load_sources(sources: list[SourceConfig], max_duration: float = math.inf, skip_bad: bool = False
                 ) -> list[Utterance]:
    """The sources' utterances up to `max_duration` seconds long, each `repeat` times. A duration missing
    from a manifest is read from the audio file's header (the batches are filled by duration); a row
    without usable text, or whose audio cannot be read, raises ManifestError naming the manifest, its line and
    the reason (`skip_bad`: it is left out, and the count logged)."""
    utterances = []
    for source in sources:
        skipped = [] if skip_bad else None
        rows = read_manifest(source.manifest, source.split, durations=True, skipped=skipped)
        if skipped:
            log.warning(skipped_note(source.manifest, skipped))
        rows = [u for u in rows if u.duration <= max_duration and u.speaker not in source.speakers_out]
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


def pitch_shift(wave: Tensor, semitones: float, n_fft: int = 512) -> Tensor:
    """Shift the pitch by about `semitones`, keeping the duration: torchaudio's phase vocoder stretches
    time, then a resample restores the length. The resample's source rate is rounded to 100 Hz, which
    keeps its kernel small (torchaudio.functional.pitch_shift resamples between rates with no common
    factor: ~10 s per second of audio) and the shift within 0.1 semitone of the request."""
    source_rate = round(SAMPLE_RATE * 2 ** (semitones / 12) / 100) * 100
    if source_rate == SAMPLE_RATE or wave.numel() < n_fft:
        return wave
    rate = SAMPLE_RATE / source_rate  # < 1: stretched longer, then played back faster (higher pitch)
    hop, window = n_fft // 4, torch.hann_window(n_fft)
    spec = torch.stft(wave, n_fft, hop, window=window, return_complex=True)
    advance = torch.linspace(0, math.pi * hop, spec.shape[-2])[..., None]
    stretched = torchaudio.functional.phase_vocoder(spec, rate, advance)
    longer = torch.istft(stretched, n_fft, hop, window=window, length=round(wave.numel() / rate))
    out = torchaudio.functional.resample(longer, source_rate, SAMPLE_RATE)
    return torch.nn.functional.pad(out, (0, max(0, wave.numel() - out.numel())))[: wave.numel()]


def room_bank(n: int, rt60: list[float], seed: int) -> list[Tensor]:
    """`n` impulse responses of random shoebox rooms (pyroomacoustics' image source method), seeded.

    Rooms are 3-10 x 3-8 x 2.4-4 m with a reverberation time drawn from `rt60` (s); the source and the
    microphone are anywhere 0.5 m from the walls; reflections are capped at order 40 (~30 ms a room).
    Each response starts at its direct path, scaled to a peak of 1."""
    import pyroomacoustics as pra  # noqa: PLC0415 (the train extra; only needed when rooms are on)

    rng = np.random.default_rng(seed)
    bank = []
    for _ in range(n):
        dims = rng.uniform([3.0, 3.0, 2.4], [10.0, 8.0, 4.0])
        absorption, order = pra.inverse_sabine(float(rng.uniform(*rt60)), dims)
        room = pra.ShoeBox(dims, fs=SAMPLE_RATE, materials=pra.Material(absorption), max_order=min(order, 40))
        room.add_source(rng.uniform(0.5, dims - 0.5))
        room.add_microphone(rng.uniform(0.5, dims - 0.5))
        room.compute_rir()
        rir = np.asarray(room.rir[0][0], np.float32)
        rir = rir[int(np.abs(rir).argmax()):]
        bank.append(torch.from_numpy(rir / np.abs(rir).max()))
    return bank


def reverberate(wave: Tensor, rir: Tensor) -> Tensor:
    """`wave` played in a room: convolved with `rir` (its decaying tail kept), at the same peak level.
    scipy's FFT convolution picks fast transform sizes: 5x faster than torchaudio's here, same result."""
    from scipy.signal import fftconvolve  # noqa: PLC0415 (the train extra, through pyroomacoustics)

    out = torch.from_numpy(fftconvolve(wave.numpy(), rir.numpy()).astype(np.float32))
    return out * (wave.abs().max() / out.abs().max().clamp_min(1e-8))


def band_limit(wave: Tensor, high_pass_hz: float, low_pass_hz: float) -> Tensor:
    """A phone's or laptop microphone's band: nothing above `low_pass_hz` (a round trip through twice
    that sample rate with torchaudio's windowed-sinc resampler), then a high-pass biquad."""
    rate = int(2 * low_pass_hz // 100) * 100
    if rate < SAMPLE_RATE:
        wave = torchaudio.functional.resample(wave, SAMPLE_RATE, rate)
        wave = torchaudio.functional.resample(wave, rate, SAMPLE_RATE)
    return torchaudio.functional.highpass_biquad(wave, SAMPLE_RATE, high_pass_hz)


@dataclass(frozen=True)
class WaveAugment:
    """The waveform augmentations drawn for one utterance (None: not applied)."""

    semitones: float | None = None  # pitch shift
    room: int | None = None  # index into the dataset's room bank
    band: tuple[float, float] | None = None  # (high-pass Hz, low-pass Hz)

    def __bool__(self) -> bool:
        return self != WaveAugment()


def draw_wave_augment(aug: AugmentConfig, rooms: int) -> WaveAugment:
    """Draw one utterance's WaveAugment from the shared `random` state. An augmentation whose
    probability is 0 draws nothing, so configs without them see the same random sequence as before."""
    semitones = room = band = None
    if aug.pitch_prob > 0 and random.random() < aug.pitch_prob:
        semitones = random.uniform(-aug.pitch_semitones, aug.pitch_semitones)
    if aug.room_prob > 0 and rooms and random.random() < aug.room_prob:
        room = random.randrange(rooms)
    if aug.bandlimit_prob > 0 and random.random() < aug.bandlimit_prob:
        band = (random.uniform(*aug.bandlimit_high_pass_hz), random.uniform(*aug.bandlimit_low_pass_hz))
    return WaveAugment(semitones, room, band)


class Variants(Protocol):
    """Rendered waveform augmentations to draw from (`asr.training.acoustic.variants.VariantStore`, which builds on this
    module's dataset)."""

    count: int  # variants of each utterance

    def load(self, audio: Path, variant: int) -> Tensor:
        """Variant `variant` of `audio`'s log-mel (T, F)."""


class SpeechDataset(Dataset):
    """Utterance i -> (log-mel (T, F), token ids (U,)); with a teacher cache also the teacher's frames of the
    clean audio (T_t, D_t) and how many of the T frames are the speech they cover (the rest: appended silence);
    with `alternatives` (phones) last the other spellings of its words (`asr.training.acoustic.pronunciations`)."""

    def __init__(self, utterances: list[Utterance], tokenizer: Tokenizer, augment: AugmentConfig | None,
                 cache: bool = False, variants: Variants | None = None, features: str = "fbank",
                 teacher: TeacherCache | None = None, alternatives: bool = False):
        self.utterances, self.tokenizer, self.augment, self.variants = utterances, tokenizer, augment, variants
        self.teacher, self.alternatives = teacher, alternatives
        self.fbank = Fbank(FbankConfig.of(features))
        self.silent_frame = torch.from_numpy(self.fbank(np.zeros(self.fbank.cfg.win_length, np.float32)))  # (1, F)
        self.cache: dict[tuple[Path, float], Tensor] | None = {} if cache else None
        channel = augment is not None and channel_enabled(augment.channel)
        rooms = augment is not None and augment.room_prob > 0 and (variants is None or channel)
        self.rooms = room_bank(augment.room_bank, augment.room_rt60, augment.room_seed) if rooms else []
        self.channel = ChannelAugment(augment.channel, self.fbank, [u.audio for u in utterances], self.rooms
                                      ) if channel else None

    def wave(self, audio: Path, speed: float) -> Tensor:
        """The waveform of `audio` played at `speed`."""
        wave = load_audio(audio)
        if speed != 1.0:  # play faster/slower: resample as if recorded at rate * speed
            wave = resample(wave, int(SAMPLE_RATE * speed), SAMPLE_RATE)
        return torch.from_numpy(wave)

    def frames(self, wave: np.ndarray) -> Tensor:
        return torch.from_numpy(self.fbank(wave.astype(np.float32, copy=False)))

    def features(self, audio: Path, speed: float, snr_db: float | None, wave_aug: WaveAugment | None = None) -> Tensor:
        """Log-mel (T, F) of `audio` played at `speed`, with noise at `snr_db` (None: clean).

        `wave_aug` applies, in order, a pitch shift and a room before the noise, and band-limiting
        after it (the microphone hears the noise too).
        Clean features are cached (as float16) when caching is on: decoding and resampling then
        happen once per (utterance, speed) instead of once per epoch."""
        key, cacheable = (audio, speed), snr_db is None and not wave_aug and self.cache is not None
        if cacheable and key in self.cache:
            return self.cache[key].float()
        wave = self.wave(audio, speed)
        if wave_aug and wave_aug.semitones is not None:
            wave = pitch_shift(wave, wave_aug.semitones)
        if wave_aug and wave_aug.room is not None:
            wave = reverberate(wave, self.rooms[wave_aug.room])
        if snr_db is not None:
            wave = add_noise(wave, snr_db)
        if wave_aug and wave_aug.band is not None:
            wave = band_limit(wave, *wave_aug.band)
        feats = self.frames(wave.numpy())
        if cacheable:
            self.cache[key] = feats.half()
        return feats

    def __len__(self) -> int:
        return len(self.utterances)

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        utt, aug, channel = self.utterances[index], self.augment, self.channel
        text = normalize(utt.text)
        if aug is None:
            feats = self.features(utt.audio, 1.0, None)
        elif channel is not None and channel.draw_noise_only():  # noise alone: nothing to say
            feats, text = self.frames(channel.noise_only()), ""
        elif channel is not None and channel.draw_wave():  # through a channel drawn afresh
            feats = self.frames(channel.render(self.wave(utt.audio, random.choice(aug.speeds)).numpy()))
        else:
            if self.variants is not None:  # speed, noise, pitch, room and band already rendered in
                feats = self.variants.load(utt.audio, random.randrange(self.variants.count))
            else:
                snr_db = random.uniform(*aug.snr_db) if random.random() < aug.noise_prob else None
                speed = random.choice(aug.speeds)
                feats = self.features(utt.audio, speed, snr_db, draw_wave_augment(aug, len(self.rooms)))
            if channel is not None:
                feats = channel.level_features(feats)
        speech_frames = feats.shape[0]  # before any silence is appended
        if aug is not None:
            if aug.mel_warp > 0:
                feats = warp_mel(feats, random.uniform(1 - aug.mel_warp, 1 + aug.mel_warp))
            if random.random() < aug.silence_prob:
                frames = round(random.uniform(0, aug.silence_seconds) * 100)
                feats = torch.cat([feats, self.silent_frame.expand(frames, -1)])
            feats = spec_augment(feats, aug)
        if self.alternatives:
            ids, alternatives = targets_and_alternatives(self.tokenizer, text)
        else:
            ids, alternatives = self.tokenizer.encode(text), None
        item = (feats, torch.tensor(ids, dtype=torch.long))
        if self.teacher is not None:
            item += (torch.from_numpy(self.teacher.load(utt.audio)), speech_frames)
        return item + ((alternatives,) if alternatives is not None else ())


def collate(batch: list[tuple[Tensor, ...]]) -> dict[str, Tensor]:
    """Pad to the longest item: feats (B, T, F), feat_lens (B,), targets (B, U), target_lens (B,), and for
    items with a teacher's frames teacher (B, T_t, D_t) float16, teacher_lens (B,), speech_lens (B,) (feature
    frames of speech, before appended silence), and for items with alternatives (phones) alternatives, a list."""
    alternatives = [item[-1] for item in batch] if isinstance(batch[0][-1], Alternatives) else None
    batch = [item[:-1] for item in batch] if alternatives else batch
    feats, targets = [item[0] for item in batch], [item[1] for item in batch]
    padded = {"feats": torch.nn.utils.rnn.pad_sequence(feats, batch_first=True),
              "feat_lens": torch.tensor([f.shape[0] for f in feats]),
              "targets": torch.nn.utils.rnn.pad_sequence(targets, batch_first=True),
              "target_lens": torch.tensor([t.numel() for t in targets])}
    if len(batch[0]) == 4:
        teacher = [item[2] for item in batch]
        padded.update(teacher=torch.nn.utils.rnn.pad_sequence(teacher, batch_first=True),
                      teacher_lens=torch.tensor([t.shape[0] for t in teacher]),
                      speech_lens=torch.tensor([item[3] for item in batch]))
    if alternatives:
        padded["alternatives"] = alternatives
    return padded


class BucketBatchSampler(Sampler[list[int]]):
    """Batches of similar duration holding at most `max_seconds` of audio, reshuffled each epoch.

    Under DDP every rank builds the same epoch-seeded list of batches and takes every world_size-th
    one, so the ranks' shares are disjoint. The list is first made a multiple of world_size long by
    halving its largest batches (never duplicating an utterance unless there are fewer utterances
    than ranks): every rank gets the same number of batches, so no rank waits in a collective for
    one that has run out. rank and world_size default to torch.distributed's, read at iteration
    time (Lightning builds the loaders after the process group exists); train.py sets
    Trainer(use_distributed_sampler=False) as Lightning cannot shard a batch sampler of this kind.
    """

    def __init__(self, durations: list[float], max_seconds: float, shuffle: bool, seed: int = 0,
                 rank: int | None = None, world_size: int | None = None):
        self.durations, self.max_seconds, self.shuffle, self.seed = durations, max_seconds, shuffle, seed
        self.rank, self.world_size = rank, world_size
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    @property
    def sampler(self) -> BucketBatchSampler:
        """Lightning calls set_epoch on `dataloader.batch_sampler.sampler`, not on the batch sampler itself."""
        return self

    def _shard(self) -> tuple[int, int]:
        """(rank, world_size): the given ones, else torch.distributed's, else (0, 1)."""
        rank, world = 0, 1
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
        return (rank if self.rank is None else self.rank), (world if self.world_size is None else self.world_size)

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
        rank, world = self._shard()
        batches = even_batches(batches, world)
        if self.shuffle:
            rng.shuffle(batches)
        return batches[rank::world]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self._batches())

    def __len__(self) -> int:
        return len(self._batches())


def even_batches(batches: list[list[int]], world: int) -> list[list[int]]:
    """`batches` made a multiple of `world` long: the largest batches are halved (which keeps every
    batch within its audio budget); only when there are fewer utterances than that are batches repeated."""
    batches = list(batches)
    target = -(-len(batches) // world) * world
    while len(batches) < target:
        largest = max(range(len(batches)), key=lambda j: len(batches[j]))
        if len(batches[largest]) < 2:
            break
        batch = batches[largest]
        batches[largest:largest + 1] = [batch[:len(batch) // 2], batch[len(batch) // 2:]]
    return batches + [batches[i % len(batches)] for i in range(target - len(batches))] if batches else batches
