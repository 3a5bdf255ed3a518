"""Channel augmentation for training, drawn on the fly for each utterance (`data.augment.channel`):

  level       the utterance made quieter or louder (a gain over a noise floor), so that the model hears
              speakers far from the microphone and converters that clip;
  channel     the utterance rendered afresh from its audio through a room, a microphone, other talkers or
              real noise, a level, and a codec (MP3, Opus, or a phone call's AMR-NB or G.711);
  noise only  an example of noise alone (coloured or real, at any level, sometimes coded) whose transcript is
              empty, so that a quiet room gives no words.
The transforms and the split of the real recordings into a training and a test side are
`asr.training.acoustic.channel`'s; this module draws them (from the dataset's seeded `random` state) and applies
them. Utterances that draw no channel keep their pre-rendered variant (`asr.training.acoustic.variants`); their level
changes in the log-mel domain, exactly as a gain on the waveform would (the log floor included).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch
from torch import Tensor

from asr.audio.files import load_audio
from asr.features import Fbank
from asr.training.acoustic import channel

FBANK_FLOOR = 1e-6  # asr.features.Fbank: log(power @ mel + this)


@dataclass
class ChannelConfig:
    noise_root: str = ""  # the data's noise/ folder (conf/experiment sets ${data.root}/noise); its training side
    level_prob: float = 0.0  # share of utterances played quieter or louder: ...
    level_db: list[float] = field(default_factory=lambda: [-40.0, 10.0])  # ... by a gain from this range (dB) ...
    floor_dbfs: list[float] = field(default_factory=lambda: [-90.0, -65.0])  # ... over a noise floor of this RMS
    wave_prob: float = 0.0  # share of utterances rendered afresh through a channel, each part with its probability:
    room_prob: float = 0.4  # a room: a real one, or one of the simulated bank (augment.room_*) when there is one
    microphone_prob: float = 0.3  # a real microphone's or phone's response
    talkers_prob: float = 0.25  # 2-6 other training utterances ...
    talkers_snr_db: list[float] = field(default_factory=lambda: [5.0, 20.0])  # ... at this SNR
    noise_prob: float = 0.35  # real noise (when no talkers were drawn) ...
    noise_snr_db: list[float] = field(default_factory=lambda: [0.0, 20.0])  # ... at this SNR
    codec_prob: float = 0.5  # a codec (CODEC_CHOICES: MP3 and Opus at low rates, a phone call's AMR-NB or G.711)
    noise_only_prob: float = 0.0  # share of examples that are noise alone, with an empty transcript, ...
    noise_only_dbfs: list[float] = field(default_factory=lambda: [-70.0, -10.0])  # ... at an RMS level from here
    noise_only_seconds: list[float] = field(default_factory=lambda: [1.0, 8.0])  # ... this long
    talker_pool: int = 48  # training utterances held in memory to be the other talkers
    seed: int = 0  # picks the talker pool


CODEC_CHOICES = [  # (codec, bit rates to draw from (None: the codec's own), through a phone's band)
    ("mp3", [8000, 16000, 24000, 32000], False),
    ("opus", [6000, 8000, 12000, 16000], False),
    ("amr", [4750, 5900, 7950, 12200], True),
    ("mulaw", [None], True),
    ("alaw", [None], True),
]


def enabled(cfg: ChannelConfig | None) -> bool:
    return cfg is not None and (cfg.level_prob > 0 or cfg.wave_prob > 0 or cfg.noise_only_prob > 0)


def gain_features(feats: Tensor, gain_db: float, floor: Tensor | None) -> Tensor:
    """fbank log-mel (T, F) of a waveform -> those of the waveform `gain_db` louder, plus `floor` (F,) of mel
    power (a noise floor's, None: none): log(g (e^x - eps) + floor + eps), the frames' own log floor kept."""
    power = (feats.double().exp() - FBANK_FLOOR).clamp_min(0.0) * 10 ** (gain_db / 10)
    if floor is not None:
        power = power + floor.double()
    return (power + FBANK_FLOOR).log().float()


class ChannelAugment:
    """Draws and applies one utterance's channel augmentation; `talkers` are the utterances' audio files that
    may be chosen as other talkers."""

    def __init__(self, cfg: ChannelConfig, fbank: Fbank, talkers: list, rooms: list[Tensor]):
        if fbank.cfg.kind != "fbank":
            raise ValueError("channel augmentation works on the fbank front end's frames (features=fbank)")
        if cfg.wave_prob > 0 or cfg.noise_only_prob > 0:
            if not cfg.noise_root:
                raise ValueError("data.augment.channel.noise_root: the noise/ folder of real rooms and noise is needed")
        self.cfg, self.fbank, self.rooms = cfg, fbank, rooms
        picked = random.Random(cfg.seed).sample(range(len(talkers)), min(cfg.talker_pool, len(talkers)))
        self.talker_files = [talkers[i] for i in picked]
        # mel power per unit of white noise variance: sum of the window's squares times each filter's taps
        self.white_mel = torch.from_numpy((fbank.window.astype(np.float64) ** 2).sum() * fbank.mel.sum(axis=0))

    @cached_property
    def pools(self) -> channel.Pools:
        return channel.pools(self.cfg.noise_root, "train")

    @cached_property
    def talkers(self) -> list[np.ndarray]:
        """The other talkers' waveforms, read when first needed (in the loader's process)."""
        return [load_audio(path) for path in self.talker_files]

    @staticmethod
    def _rng() -> np.random.Generator:
        return np.random.default_rng(random.getrandbits(64))

    def draw_noise_only(self) -> bool:
        return self.cfg.noise_only_prob > 0 and random.random() < self.cfg.noise_only_prob

    def draw_wave(self) -> bool:
        return self.cfg.wave_prob > 0 and random.random() < self.cfg.wave_prob

    def _level(self, wave: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if self.cfg.level_prob > 0 and random.random() < self.cfg.level_prob:
            return channel.at_level(wave, random.uniform(*self.cfg.level_db), random.uniform(*self.cfg.floor_dbfs), rng)
        return np.clip(wave, -1.0, 1.0)

    def _codec(self, wave: np.ndarray) -> np.ndarray:
        name, rates, phone = random.choice(CODEC_CHOICES)
        if phone:
            wave = channel.phone_band(wave)
        return channel.codec(wave, name, random.choice(rates))

    def render(self, wave: np.ndarray) -> np.ndarray:
        """A waveform through a channel drawn afresh: room, microphone, other talkers or noise, level, codec."""
        cfg, rng, pools = self.cfg, self._rng(), self.pools
        if random.random() < cfg.room_prob:
            if self.rooms and random.random() < 0.5:
                room = self.rooms[random.randrange(len(self.rooms))].numpy()
                wave = channel.convolve(wave, room / max(float(np.sqrt(np.sum(room ** 2))), 1e-8))
            else:
                wave = channel.convolve(wave, pools.rooms[channel.balanced_index(pools.names["rooms"], rng)])
        if random.random() < cfg.microphone_prob:
            wave = channel.convolve(wave, pools.microphones[random.randrange(len(pools.microphones))])
        if self.talkers and random.random() < cfg.talkers_prob:
            chosen = random.sample(self.talkers, min(random.randint(2, 6), len(self.talkers)))
            wave = channel.mix(wave, channel.babble(chosen, len(wave), rng), random.uniform(*cfg.talkers_snr_db))
        elif random.random() < cfg.noise_prob:
            noise = pools.noise[random.randrange(len(pools.noise))]
            wave = channel.mix(wave, channel.crop(noise, len(wave), rng), random.uniform(*cfg.noise_snr_db))
        wave = self._level(wave, rng)
        if random.random() < cfg.codec_prob:
            wave = self._codec(wave)
        return wave

    def noise_only(self) -> np.ndarray:
        """A waveform of noise alone: coloured or real, at a level from noise_only_dbfs, a third of them coded."""
        cfg, rng = self.cfg, self._rng()
        samples = round(random.uniform(*cfg.noise_only_seconds) * self.fbank.cfg.sample_rate)
        if random.random() < 0.5:
            noise = channel.coloured_noise(samples, random.choice(["white", "pink", "brown"]), rng)
        else:
            noise = channel.crop(self.pools.noise[random.randrange(len(self.pools.noise))], samples, rng)
            noise = noise / np.float32(max(channel.rms(noise), 1e-8))
        wave = np.clip(noise * np.float32(channel.dbfs(random.uniform(*cfg.noise_only_dbfs))), -1.0, 1.0)
        return self._codec(wave) if random.random() < 1 / 3 else wave

    def level_features(self, feats: Tensor) -> Tensor:
        """A pre-rendered utterance's log-mel at another level over a white noise floor (level_prob of them)."""
        if not (self.cfg.level_prob > 0 and random.random() < self.cfg.level_prob):
            return feats
        floor = self.white_mel * channel.dbfs(random.uniform(*self.cfg.floor_dbfs)) ** 2
        return gain_features(feats, random.uniform(*self.cfg.level_db), floor)
