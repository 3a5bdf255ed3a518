"""JSON Lines manifests: one utterance a line, e.g.

    {"audio": "anna/001.wav", "duration": 2.31, "text": "The water was cold.", "speaker": "anna"}

`audio` is relative to the manifest's folder (or absolute). `text` is what is said, as written: every
reader normalises it (`asr.text.normalize`), and every reader that scores or trains refuses a line whose text is
missing, null, not a string, or empty once normalised (`usable_text`): an empty reference would make a WER
silently wrong; `skipped=` (the tools' --skip-bad) leaves such lines, and any other bad line, out instead.
`duration` (seconds) may be left out (or null, or 0): `read_manifest(..., durations=True)`, which training
uses, then reads it from the audio file's header.
`speaker` and `split` are optional. docs/corpus.md describes the format for users.

`python -m asr.manifest` builds one from a folder of audio files with transcripts beside them, or from a
CSV/TSV table of paths and text (asr/corpus/build.py).
"""
from __future__ import annotations

import functools
import json
import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

from asr.audio import AudioError
from asr.audio.files import audio_duration
from asr.text.normalize import normalize

log = logging.getLogger("asr.manifest")


class ManifestError(Exception):
    """A manifest, or a line of it, that cannot be used; the message names the file, the line and the reason."""


@dataclass
class Utterance:
    audio: Path
    duration: float | None  # seconds; None: not in the manifest (read_manifest(durations=True) reads it)
    text: str
    speaker: str = ""
    split: str = ""


@functools.cache
def header_duration(audio: Path) -> float:
    """`audio_duration` of a file, read once per process: a training run reads its manifests more than
    once (the initial model's tokenizer and CMVN, then the loaders). Raises AudioError."""
    return audio_duration(audio)


def _duration(row: dict) -> float | None:
    """A row's duration; None when it has none (missing, null, or 0, which some tools wrote for unknown)."""
    value = row.get("duration")
    if value is None or value == 0:
        return None
    duration = float(value)
    if not math.isfinite(duration) or duration < 0:
        raise ValueError(f"duration must be a positive number of seconds, not {value!r}")
    return duration


def usable_text(row: dict) -> str:
    """A row's text, refused (ValueError, the reason) when there are no words in it to score or train on."""
    if "text" not in row:
        raise ValueError('no "text"')
    text = row["text"]
    if text is None:
        raise ValueError('"text" is null')
    if not isinstance(text, str):
        raise ValueError(f'"text" is a {type(text).__name__}, not a string')
    if not normalize(text):
        raise ValueError(f'"text" has no words ({text!r})')
    return text


def _audio_path(folder: Path, audio: str) -> Path:
    """A row's audio path, relative to the manifest's `folder` (or absolute), normalised ("lists/../a.wav" ->
    "a.wav") unless a symbolic link makes the normalised path another file."""
    if not isinstance(audio, str):
        raise TypeError(f"audio must be a path, not {type(audio).__name__}")
    joined = folder / audio
    if ".." not in joined.parts:
        return joined
    normal = Path(os.path.normpath(joined))
    return normal if os.path.realpath(normal) == os.path.realpath(joined) else joined


def read_manifest(path: str | Path, split: str = "", durations: bool = False, text: bool = True,
                  skipped: list[ManifestError] | None = None) -> list[Utterance]:
    """Parse a manifest; raises ManifestError on the first bad line: broken JSON, no audio, a bad duration, and
    (with `text`, for every reader that scores or trains) no usable text. Given a list as `skipped`, a bad line
    is appended to it and left out instead (the tools' --skip-bad). With `split`, keep only the rows of that
    split (e.g. FSDD's "train"/"test") and the rows that name none. With `durations`, a kept row without a
    duration gets its audio file's (from the header), and a row whose audio cannot be read is a bad line;
    without, such rows keep duration None (reading, say, 10k headers is not free). `text=False` (transcribing,
    where no text is needed) keeps a row's text if it is a string, else ""."""
    path = Path(path)
    if not path.is_file():
        raise ManifestError(f"{path}: no such manifest")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise ManifestError(f"{path}: not a JSON Lines manifest (binary or not UTF-8 text)") from None
    utterances, missing, began = [], 0, time.perf_counter()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            utt = _utterance(path, number, line, text)
        except ManifestError as err:
            if skipped is None:
                raise
            skipped.append(err)
            continue
        if split and utt.split not in ("", split):
            continue
        if durations and utt.duration is None:
            try:
                utt.duration = header_duration(utt.audio)
            except AudioError as err:
                bad = ManifestError(f"{path}:{number}: {err}")
                if skipped is None:
                    raise bad from None
                skipped.append(bad)
                continue
            missing += 1
        utterances.append(utt)
    if missing:
        log.info("%s: %d of %d rows have no duration: read from their audio headers in %.1f s",
                 path, missing, len(utterances), time.perf_counter() - began)
    return utterances


def _utterance(path: Path, number: int, line: str, text: bool) -> Utterance:
    """Line `number` of the manifest at `path` (ManifestError naming both when it cannot be used)."""
    try:
        row = json.loads(line)
        if not isinstance(row, dict):
            raise TypeError(f"a line must be a JSON object, not {type(row).__name__}")
        utt = Utterance(_audio_path(path.parent, row["audio"]), _duration(row), "", str(row.get("speaker", "")),
                        str(row.get("split", "")))
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise ManifestError(f"{path}:{number}: broken manifest line ({type(err).__name__}: {err})") from None
    if not text:  # transcribing: the text is not needed
        utt.text = row["text"] if isinstance(row.get("text"), str) else ""
        return utt
    try:
        utt.text = usable_text(row)
    except ValueError as err:
        raise ManifestError(f"{path}:{number}: no usable text: {err}") from None
    return utt


def skipped_note(path: str | Path, skipped: list[ManifestError]) -> str:
    """What a tool says of the lines `read_manifest` left out: how many, and the first one's reason."""
    return f"{path}: skipped {len(skipped)} bad line(s) (the first: {skipped[0]})" if skipped else ""


def write_manifest(path: str | Path, rows: list[dict]) -> None:
    """Write rows as JSON Lines (atomic: a temp file renamed into place)."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(json.dumps(row) + "\n" for row in rows))
    tmp.replace(path)


def relative_audio(audio: Path, out_dir: Path) -> str:
    """`audio` as a manifest in `out_dir` names it: relative to that folder, else absolute (another drive)."""
    try:
        return os.path.relpath(audio.resolve(), out_dir.resolve())
    except ValueError:
        return str(audio.resolve())
