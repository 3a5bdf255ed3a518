"""The robustness benchmark's conditions (issue 89): each one a seeded function of an utterance's 16 kHz wave,
made of `asr.training.acoustic.channel`'s transforms and of the *test* side of the noise folder only
(`channel.pools(root, "test")`: held-out rooms and microphones, the last 30% of each noise recording), so no
room, microphone or stretch of noise that training hears is ever played here.

A condition's randomness (which room, which talkers, which SNR) comes from a generator seeded by the set, the
condition and the utterance's name (`rng_for`), so the same utterance sounds the same in every run, whatever
else the run holds. Every condition keeps the utterance's length. Besides speech, `noise_items` lists noise
alone (coloured and real, at three levels), where the figure is the words a recognizer invents.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

from asr.audio import SAMPLE_RATE
from asr.audio.files import load_audio
from asr.corpus.manifest import Utterance
from asr.training.acoustic import channel

SEED = 0  # mixed into every seed: change it to draw a different (equally fixed) rendering
SIDE = "test"  # the side of channel.pools the benchmark plays; training plays the other
QUIET_FLOOR_DBFS = -75.0  # the noise floor under quiet speech (RMS): a converter's and a room's hiss
NOISE_SNR_DB = (5.0, 15.0)  # real noise under speech, drawn per utterance
TALKERS, TALKERS_SNR_DB = 3, 10.0  # other talkers of the same set, together this far below the speech
NOISE_COLOURS = ("pink", "brown", "white")
NOISE_LEVELS_DBFS = (-40.0, -25.0, -10.0)  # RMS levels of noise alone
NOISE_SECONDS = 30.0  # coloured noise alone lasts this long; a real clip's test part is cut to it


def rng_for(*parts: str) -> np.random.Generator:
    """A generator seeded by `parts` (set, condition, utterance) and SEED: stable across runs and machines
    (sha256, not Python's salted hash)."""
    digest = hashlib.sha256("/".join([str(SEED), *parts]).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


@dataclass
class Speech:
    """One utterance as a condition hears it: its set, name (the manifest's audio path, relative), speaker, wave."""

    set: str
    name: str
    speaker: str
    wave: np.ndarray


@lru_cache(maxsize=64)
def _talker_wave(path: str) -> np.ndarray:
    return load_audio(path)


@dataclass
class Sources:
    """What conditions draw from: the test side of the noise folder, and each set's whole manifest (the other
    talkers come from all of it, so an utterance's rendering does not depend on the subset benchmarked)."""

    noise_root: Path
    sets: dict[str, list[Utterance]] = field(default_factory=dict)  # set -> its manifest, in order
    roots: dict[str, Path] = field(default_factory=dict)  # set -> the folder its audio paths are relative to

    @property
    def pools(self) -> channel.Pools:
        return channel.pools(str(self.noise_root), SIDE)

    def talkers(self, speech: Speech, rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
        """TALKERS other utterances of the speech's set: each by a speaker other than the speech's and than each
        other's where the set has enough speakers, else filled up with other utterances."""
        rows = [u for u in self.sets[speech.set] if self.name(speech.set, u) != speech.name]
        order = [int(i) for i in rng.permutation(len(rows))]
        picked, heard = [], {speech.speaker} if speech.speaker else set()
        for i in order:
            if len(picked) < TALKERS and (not rows[i].speaker or rows[i].speaker not in heard):
                picked.append(i)
                heard.add(rows[i].speaker)
        picked += [i for i in order if i not in picked][:TALKERS - len(picked)]
        return [(self.name(speech.set, rows[i]), _talker_wave(str(rows[i].audio))) for i in picked]

    def name(self, set_name: str, utt: Utterance) -> str:
        """An utterance's name: its audio path relative to its manifest's folder."""
        return str(Path(utt.audio).relative_to(self.roots[set_name]))


Render = Callable[[Sources, Speech, np.random.Generator], tuple[np.ndarray, str]]  # -> (wave, what was drawn)


@dataclass(frozen=True)
class Condition:
    name: str  # a file-name-safe key: the cache's folder, the JSON's key
    label: str  # the table's row
    what: str  # what is done to the speech (the README's list)
    render: Render


def _pick(names: list[str], rng: np.random.Generator) -> int:
    return int(rng.integers(len(names)))


def _codec(name: str, bitrate: int | None, phone: bool) -> Render:
    def render(_: Sources, speech: Speech, rng: np.random.Generator) -> tuple[np.ndarray, str]:
        wave = channel.phone_band(speech.wave) if phone else speech.wave
        return channel.codec(wave, name, bitrate), ""
    return render


def _level(gain_db: float, floor_dbfs: float | None) -> Render:
    def render(_: Sources, speech: Speech, rng: np.random.Generator) -> tuple[np.ndarray, str]:
        return channel.at_level(speech.wave, gain_db, floor_dbfs, rng), ""
    return render


def _response(kind: str) -> Render:
    def render(sources: Sources, speech: Speech, rng: np.random.Generator) -> tuple[np.ndarray, str]:
        pools = sources.pools
        index = _pick(pools.names[kind], rng)
        return channel.convolve(speech.wave, getattr(pools, kind)[index]), pools.names[kind][index]
    return render


def _real_noise(sources: Sources, speech: Speech, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    pools = sources.pools
    index = _pick(pools.names["noise"], rng)
    snr = float(rng.uniform(*NOISE_SNR_DB))
    noise = channel.crop(pools.noise[index], len(speech.wave), rng)
    return channel.mix(speech.wave, noise, snr), f"{pools.names['noise'][index]} at {snr:.1f} dB"


def _other_talkers(sources: Sources, speech: Speech, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    talkers = sources.talkers(speech, rng)
    crowd = channel.babble([wave for _, wave in talkers], len(speech.wave), rng)
    return channel.mix(speech.wave, crowd, TALKERS_SNR_DB), " + ".join(name for name, _ in talkers)


def _clean(_: Sources, speech: Speech, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    return speech.wave.astype(np.float32), ""


CLEAN = Condition("clean", "clean", "the utterance as recorded", _clean)
CONDITIONS = [
    CLEAN,
    Condition("mp3-16", "MP3 16 kbps", "MP3 (LAME) at 16 kbit/s, decoded again", _codec("mp3", 16000, False)),
    Condition("mp3-24", "MP3 24 kbps", "MP3 (LAME) at 24 kbit/s, decoded again", _codec("mp3", 24000, False)),
    Condition("opus-8", "Opus 8 kbps", "Opus at 8 kbit/s, decoded again", _codec("opus", 8000, False)),
    Condition("phone-amr", "phone call, AMR-NB 7.95 kbps",
              "a phone's band (300-3400 Hz), then AMR-NB at 8 kHz, 7.95 kbit/s", _codec("amr", 7950, True)),
    Condition("phone-mulaw", "phone call, G.711 mu-law",
              "a phone's band (300-3400 Hz), then G.711 mu-law at 8 kHz (64 kbit/s)", _codec("mulaw", None, True)),
    Condition("microphone", "microphone responses",
              "one of the test side's microphones (every third MicIRP microphone, the phone's microphone)",
              _response("microphones")),
    Condition("quiet-25", "quiet (-25 dB)", f"25 dB quieter, over a noise floor at {QUIET_FLOOR_DBFS:g} dBFS",
              _level(-25.0, QUIET_FLOOR_DBFS)),
    Condition("quiet-35", "quiet (-35 dB)", f"35 dB quieter, over a noise floor at {QUIET_FLOOR_DBFS:g} dBFS",
              _level(-35.0, QUIET_FLOOR_DBFS)),
    Condition("loud-10", "loud (+10 dB, clipped)", "10 dB louder, clipped at full scale", _level(10.0, None)),
    Condition("reverb", "reverberant room", "one of the test side's real rooms (4 OpenAIR halls, church and "
              "studio, a living room)", _response("rooms")),
    Condition("noise", f"real noise, {NOISE_SNR_DB[0]:g}-{NOISE_SNR_DB[1]:g} dB SNR",
              "the test side's real noise (the last 30% of each of the 4 scenes) at an SNR drawn from "
              f"{NOISE_SNR_DB[0]:g}-{NOISE_SNR_DB[1]:g} dB", _real_noise),
    Condition("talkers", f"{TALKERS} other talkers at {TALKERS_SNR_DB:g} dB",
              f"{TALKERS} other utterances of the same set (other speakers where possible), at equal levels, "
              f"together {TALKERS_SNR_DB:g} dB below the speech", _other_talkers),
]
BY_NAME = {c.name: c for c in CONDITIONS}


@dataclass(frozen=True)
class NoiseItem:
    """Noise alone: a colour (synthetic) or a test-side recording, at an RMS level."""

    name: str  # e.g. pink@-25
    label: str
    source: str  # a colour, or the recording's name in the pools
    level_dbfs: float


def noise_items(sources: Sources) -> list[NoiseItem]:
    """Every colour and every test-side noise recording at every level of NOISE_LEVELS_DBFS."""
    items = []
    recordings = [(Path(n.split("[")[0]).stem, n) for n in sources.pools.names["noise"]]
    for level in NOISE_LEVELS_DBFS:
        items += [NoiseItem(f"{colour}@{level:g}", f"{colour} noise, {level:g} dBFS", colour, level)
                  for colour in NOISE_COLOURS]
        items += [NoiseItem(f"{stem}@{level:g}", f"{stem.replace('_', ' ')}, {level:g} dBFS", name, level)
                  for stem, name in recordings]
    return items


def render_noise(item: NoiseItem, sources: Sources, seconds: float) -> np.ndarray:
    """The item's noise, `seconds` long (a recording's test part if shorter), at its RMS level, clipped at full
    scale as a converter clips."""
    rng = rng_for("noise-alone", item.name)
    samples = round(seconds * SAMPLE_RATE)
    if item.source in NOISE_COLOURS:
        noise = channel.coloured_noise(samples, item.source, rng)
    else:
        noise = sources.pools.noise[sources.pools.names["noise"].index(item.source)][:samples]
        noise = noise / np.float32(max(channel.rms(noise), 1e-8))
    return np.clip(noise * np.float32(channel.dbfs(item.level_dbfs)), -1.0, 1.0).astype(np.float32)


def render(condition: Condition, sources: Sources, speech: Speech) -> tuple[np.ndarray, str]:
    """The speech through `condition`, seeded by set, condition and name: (wave of the same length, what was
    drawn: the room, microphone, noise and SNR, or talkers; "" for none)."""
    wave, drawn = condition.render(sources, speech, rng_for(speech.set, condition.name, speech.name))
    if len(wave) != len(speech.wave):
        raise RuntimeError(f"{condition.name} changed the length of {speech.name}")
    return wave.astype(np.float32), drawn
