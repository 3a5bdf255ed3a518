"""The benchmark's evaluation sets, and the same audio as 16 kHz wav files for the peers."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import soundfile as sf

from asr.audio import SAMPLE_RATE, AudioError
from asr.audio.files import load_audio
from asr.corpus.manifest import Utterance, read_manifest

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"


@dataclass
class EvalSet:
    name: str
    manifest: Path
    split: str = ""  # keep only rows of this "split"
    note: str = ""


SETS = [
    EvalSet("speechocean762-dev", SHARED / "speechocean762" / "dev.jsonl", note="accented (L2) read speech, children and adults"),
    EvalSet("librispeech-dev-clean-2", SHARED / "librispeech" / "dev-clean-2.jsonl",
            note="native read audiobook speech, 26 speakers no training set has (Mini LibriSpeech dev)"),
    EvalSet("fsdd-test", SHARED / "fsdd" / "fsdd.jsonl", split="test", note="spoken digits, 8 kHz"),
    EvalSet("synthetic-check", ROOT / "benchmarks" / "check_sets" / "check.jsonl",
            note="held-out synthetic voices and sentences (the committed rendering)"),
    EvalSet("kokoro-en-check", ROOT / "benchmarks" / "check_sets" / "check_kokoro_en.jsonl",
            note="held-out Kokoro English voices (af_sky, am_echo, bf_isabella, bm_daniel), held-out sentences"),
]


@dataclass
class Clip:
    """One utterance loaded as 16 kHz mono float32."""

    name: str  # file path relative to the manifest folder
    text: str
    wave: np.ndarray

    @property
    def seconds(self) -> float:
        return self.wave.size / SAMPLE_RATE


def load_set(eval_set: EvalSet, limit: int | None) -> tuple[list[Clip], str]:
    """The first `limit` utterances of a set, loaded; returns ([], reason) when the set is absent."""
    if not eval_set.manifest.is_file():
        return [], f"{eval_set.manifest} not found (skipped)"
    utterances: list[Utterance] = read_manifest(eval_set.manifest, eval_set.split)
    clips = []
    for utt in utterances[:limit]:
        try:
            wave = load_audio(utt.audio)
        except AudioError as err:
            print(f"benchmark: skipping {err}")
            continue
        clips.append(Clip(str(utt.audio.relative_to(eval_set.manifest.parent)), utt.text, wave))
    return clips, ""


def write_wavs(clips: list[Clip], folder: Path) -> Path:
    """The clips as 16 kHz 16-bit wav files plus a manifest of absolute paths (for peer workers),
    so every system hears exactly the samples ours hears."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for index, clip in enumerate(clips):
        path = folder / f"{index:05d}.wav"
        sf.write(str(path), clip.wave, SAMPLE_RATE, subtype="FLOAT")
        rows.append({"audio": str(path.resolve()), "text": clip.text, "name": clip.name})
    manifest = folder / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return manifest


def looped_chunks(clips: list[Clip], seconds: float, chunk_samples: int) -> Iterator[np.ndarray]:
    """`seconds` of audio made by cycling through the clips (with 0.3 s of faint noise between
    them), cut into chunks of `chunk_samples`; generated on the fly so memory stays constant."""
    total = round(seconds * SAMPLE_RATE)
    rng = np.random.default_rng(0)
    gap = (1e-3 * rng.standard_normal(int(0.3 * SAMPLE_RATE))).astype(np.float32)
    buffer, emitted, index = np.zeros(0, np.float32), 0, 0
    while emitted < total:
        while buffer.size < chunk_samples:
            buffer = np.concatenate([buffer, clips[index % len(clips)].wave, gap])
            index += 1
        size = min(chunk_samples, total - emitted)
        yield buffer[:size].copy()
        buffer, emitted = buffer[size:], emitted + size
