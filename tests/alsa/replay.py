"""Helpers to replay audio as a fake ALSA microphone (see replay.conf.in)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import soundfile as sf

TEMPLATE = Path(__file__).with_name("replay.conf.in")
RATE = 16000


def write_config(raw: Path, folder: Path) -> Path:
    """An ALSA config whose default capture device replays `raw` (S16_LE, 16 kHz, mono)."""
    config = folder / "asound.conf"
    config.write_text(TEMPLATE.read_text().replace("@INFILE@", str(raw.resolve())))
    return config


def empty_config(folder: Path) -> Path:
    """An ALSA config whose default device is a sound card that does not exist (a machine
    without a sound card). A completely empty config makes alsa-lib abort instead."""
    config = folder / "nocard.conf"
    config.write_text("pcm.!default { type hw card 99 }\nctl.!default { type hw card 99 }\n")
    return config


def speak(text: str, folder: Path, seconds: float) -> np.ndarray:
    """espeak-ng -> 16 kHz int16 mono, zero-padded to exactly `seconds` (sox resamples)."""
    if not (shutil.which("espeak-ng") and shutil.which("sox")):
        raise RuntimeError("espeak-ng and sox are needed")
    wav, raw = folder / "espeak.wav", folder / "espeak.raw"
    subprocess.run(["espeak-ng", "-w", str(wav), text], check=True)
    subprocess.run(["sox", str(wav), "-r", str(RATE), "-c", "1", "-b", "16", "-e", "signed-integer",
                    "-t", "raw", str(raw)], check=True)
    samples = np.fromfile(raw, dtype="<i2")
    total = round(seconds * RATE)
    if samples.size > total:
        raise ValueError(f"speech is {samples.size / RATE:.2f} s, longer than {seconds} s")
    return np.concatenate([samples, np.zeros(total - samples.size, dtype="<i2")])


def save_replay(samples: np.ndarray, folder: Path) -> tuple[Path, Path]:
    """Write the samples as the raw replay file and as a 16 kHz wav: (raw, wav)."""
    raw, wav = folder / "replay.raw", folder / "replay.wav"
    samples.astype("<i2").tofile(raw)
    sf.write(str(wav), samples, RATE, subtype="PCM_16")
    return raw, wav


def alsa_env(config: Path) -> dict[str, str]:
    """The environment for a subprocess whose PortAudio should use `config`."""
    return {**os.environ, "ALSA_CONFIG_PATH": str(config)}
