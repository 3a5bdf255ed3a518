"""The channels a user's speech reaches the recognizer through: level, codecs, phone bands, microphones,
rooms, noise and other talkers, as numpy transforms of 16 kHz float32 waveforms.

Training's augmentation (`asr.training.acoustic.data`) and the robustness benchmark (`scripts/bench/robustness.py`)
both draw from here. The real recordings of the data's `noise/` folder (its README) are split once, here,
into a part for training and a part for testing, so the benchmark never plays a room, a microphone or a
stretch of noise that training heard:
  rooms        test: the OpenAIR halls, church and studio (openair-toobamp) and the living room; training:
               the Surrey office, the BBC listening room, the seminar room and the sports hall;
  microphones  test: every third MicIRP microphone by name and the phone's microphone; training: the other
               MicIRP microphones and the phone's loudspeaker;
  noise        test: the last 30% of each of the 4 scenes; training: the first 70%.
Codecs run in memory through PyAV (ffmpeg's encoders: MP3, Opus, AMR-NB, G.711 mu-law and A-law).
"""
from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from asr.audio import SAMPLE_RATE
from asr.audio.files import load_audio
from asr.audio.resample import resample

TEST_SHARE_OF_NOISE = 0.3  # the end of each noise recording that only the benchmark plays
TEST_ROOMS = ("openair-toobamp", "living_room")  # collections, or file-name parts, of the rooms held out
CODECS = {  # name -> (container, encoder, sample rate)
    "mp3": ("mp3", "libmp3lame", 16000),
    "opus": ("ogg", "libopus", 16000),
    "amr": ("amr", "libopencore_amrnb", 8000),
    "mulaw": ("wav", "pcm_mulaw", 8000),
    "alaw": ("wav", "pcm_alaw", 8000),
}


@dataclass
class Pools:
    """The real responses and noise of one side of the split: rooms and microphones (impulse responses
    aligned on their direct path, unit energy), noise (whole recordings' parts, float32)."""

    rooms: list[np.ndarray] = field(default_factory=list)
    microphones: list[np.ndarray] = field(default_factory=list)
    noise: list[np.ndarray] = field(default_factory=list)
    names: dict[str, list[str]] = field(default_factory=dict)  # kind -> the files (noise: with the part taken)


def _is_test_room(row: dict) -> bool:
    return row["collection"] in TEST_ROOMS or any(part in row["audio"] for part in TEST_ROOMS)


def _is_test_microphone(row: dict, index: int) -> bool:
    return row["type"] == "phone_microphone_ir" or (row["collection"] == "micirp" and index % 3 == 0)


def _response(path: Path) -> np.ndarray:
    """An impulse response from its direct path (the peak) on, at unit energy."""
    ir = load_audio(path)
    ir = ir[int(np.abs(ir).argmax()):]
    return (ir / max(float(np.sqrt(np.sum(ir ** 2))), 1e-8)).astype(np.float32)


@lru_cache(maxsize=4)
def pools(noise_root: str, side: str) -> Pools:
    """The `side` ("train" or "test") of `noise_root`'s recordings (its manifest.jsonl)."""
    if side not in ("train", "test"):
        raise ValueError(f"side={side!r} must be train or test")
    root = Path(noise_root)
    rows = [json.loads(line) for line in (root / "manifest.jsonl").read_text().splitlines() if line.strip()]
    test = side == "test"
    out = Pools(names={"rooms": [], "microphones": [], "noise": []})
    microphones = sorted((r for r in rows if r["kind"] == "rir" and "room" not in r["type"]), key=lambda r: r["audio"])
    for index, row in enumerate(microphones):
        if _is_test_microphone(row, index) == test:
            out.microphones.append(_response(root / row["audio"]))
            out.names["microphones"].append(row["audio"])
    for row in rows:
        if row["kind"] == "rir" and row not in microphones and _is_test_room(row) == test:
            out.rooms.append(_response(root / row["audio"]))
            out.names["rooms"].append(row["audio"])
        if row["kind"] == "noise":
            wave = load_audio(root / row["audio"])
            cut = round(len(wave) * (1 - TEST_SHARE_OF_NOISE))
            out.noise.append(wave[cut:] if test else wave[:cut])
            out.names["noise"].append(f"{row['audio']}[{'last' if test else 'first'} "
                                      f"{round(100 * (TEST_SHARE_OF_NOISE if test else 1 - TEST_SHARE_OF_NOISE))}%]")
    return out


def balanced_index(names: list[str], rng: np.random.Generator) -> int:
    """An index into `names` (files) drawn so that each folder (a collection, a room) is as likely as another,
    however many files it holds."""
    groups: dict[str, list[int]] = {}
    for index, name in enumerate(names):
        groups.setdefault(str(Path(name).parent), []).append(index)
    group = list(groups.values())[int(rng.integers(len(groups)))]
    return group[int(rng.integers(len(group)))]


def rms(wave: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(wave, dtype=np.float64)))) if wave.size else 0.0


def dbfs(level_db: float) -> float:
    """The RMS amplitude of a level in dB relative to full scale (1.0)."""
    return 10 ** (level_db / 20)


def coloured_noise(samples: int, colour: str, rng: np.random.Generator) -> np.ndarray:
    """Noise of unit RMS whose power falls as 1/f^a: white (a=0), pink (1) or brown (2)."""
    exponent = {"white": 0.0, "pink": 1.0, "brown": 2.0}[colour]
    spectrum = np.fft.rfft(rng.standard_normal(samples))
    freqs = np.fft.rfftfreq(samples, 1 / SAMPLE_RATE)
    spectrum *= np.where(freqs > 20.0, np.maximum(freqs, 20.0), 20.0) ** (-exponent / 2)  # flat below 20 Hz
    noise = np.fft.irfft(spectrum, n=samples)
    return (noise / max(rms(noise), 1e-12)).astype(np.float32)


def at_level(wave: np.ndarray, gain_db: float, floor_dbfs: float | None, rng: np.random.Generator) -> np.ndarray:
    """`wave` `gain_db` louder (or quieter), over a white-to-brown noise floor at `floor_dbfs` RMS (None: none),
    clipped to full scale as a converter clips."""
    out = wave * np.float32(10 ** (gain_db / 20))
    if floor_dbfs is not None:
        colour = rng.choice(["white", "pink", "brown"])
        out = out + coloured_noise(len(wave), colour, rng) * np.float32(dbfs(floor_dbfs))
    return np.clip(out, -1.0, 1.0).astype(np.float32)


def mix(wave: np.ndarray, noise: np.ndarray, snr_db: float) -> np.ndarray:
    """`wave` with `noise` (cut or looped to its length) added at `snr_db`."""
    if len(noise) < len(wave):
        noise = np.tile(noise, -(-len(wave) // max(len(noise), 1)))
    noise = noise[:len(wave)]
    scale = rms(wave) / max(rms(noise), 1e-8) / 10 ** (snr_db / 20)
    return (wave + np.float32(scale) * noise).astype(np.float32)


def crop(noise: np.ndarray, samples: int, rng: np.random.Generator) -> np.ndarray:
    """A random stretch of `samples` of `noise` (looped where it is shorter)."""
    if len(noise) <= samples:
        return np.tile(noise, -(-samples // max(len(noise), 1)))[:samples]
    start = int(rng.integers(0, len(noise) - samples))
    return noise[start:start + samples]


def babble(talkers: list[np.ndarray], samples: int, rng: np.random.Generator) -> np.ndarray:
    """Other talkers at equal levels, each from a random point, summed to `samples` long."""
    out = np.zeros(samples, np.float32)
    for talker in talkers:
        piece = crop(talker, samples, rng)
        out += piece / np.float32(max(rms(piece), 1e-8))
    return out


def convolve(wave: np.ndarray, response: np.ndarray) -> np.ndarray:
    """`wave` through an impulse response that starts at its direct path: as long as the input (the tail
    past its end cut), at the input's RMS level."""
    from scipy.signal import fftconvolve  # noqa: PLC0415 (scipy: the train extra)

    out = fftconvolve(wave, response)[:len(wave)].astype(np.float32)
    return out * np.float32(rms(wave) / max(rms(out), 1e-8))


def codec(wave: np.ndarray, name: str, bitrate: int | None = None) -> np.ndarray:
    """`wave` encoded with codec `name` (CODECS) at `bitrate` (bits/s; None: the encoder's default) and decoded
    again, in memory: 16 kHz float32 of the input's length. An 8 kHz codec (a phone's) band-limits it too."""
    import av  # noqa: PLC0415 (PyAV, a base dependency, loads ffmpeg's libraries)

    container, encoder, rate = CODECS[name]
    samples = resample(wave, SAMPLE_RATE, rate) if rate != SAMPLE_RATE else wave
    pcm = np.clip(np.round(samples * 32767), -32768, 32767).astype(np.int16)
    buffer = io.BytesIO()
    with av.open(buffer, "w", format=container) as out:
        stream = out.add_stream(encoder, rate=rate)
        stream.layout = "mono"
        if bitrate:
            stream.bit_rate = bitrate
        frame = av.AudioFrame.from_ndarray(pcm[None], format="s16", layout="mono")
        frame.sample_rate = rate
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            out.mux(packet)
    buffer.seek(0)
    pieces, decoded_rate = [], rate
    with av.open(buffer, format=container) as inp:
        for frame in inp.decode(audio=0):
            array = frame.to_ndarray()
            array = array.astype(np.float32) / 32768 if array.dtype == np.int16 else array.astype(np.float32)
            pieces.append(array.reshape(-1) if array.shape[0] == 1 else array.mean(axis=0))
            decoded_rate = frame.sample_rate
    decoded = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
    if decoded_rate != SAMPLE_RATE:
        decoded = resample(decoded, decoded_rate, SAMPLE_RATE)
    decoded = decoded[:len(wave)]
    return np.pad(decoded, (0, len(wave) - len(decoded))).astype(np.float32)


def phone_band(wave: np.ndarray) -> np.ndarray:
    """A telephone's band: 300-3400 Hz (a 4th-order Butterworth band-pass; the 8 kHz codecs cut above 4 kHz too)."""
    from scipy.signal import butter, sosfilt  # noqa: PLC0415

    sos = butter(4, [300.0, 3400.0], btype="bandpass", fs=SAMPLE_RATE, output="sos")
    return sosfilt(sos, wave).astype(np.float32)
