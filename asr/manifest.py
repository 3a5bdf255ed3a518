"""JSON Lines manifests: one utterance a line, {"audio", "duration", "text", optional "speaker"}.

`audio` is relative to the manifest's folder (or absolute).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


class ManifestError(Exception):
    """A manifest line that cannot be used; the message names the file, the line and the reason."""


@dataclass
class Utterance:
    audio: Path
    duration: float
    text: str
    speaker: str = ""
    split: str = ""


def read_manifest(path: str | Path, split: str = "") -> list[Utterance]:
    """Parse a manifest; raises ManifestError on the first bad line. With `split`, keep only the rows of
    that split (e.g. FSDD's "train"/"test") and the rows that name none."""
    path = Path(path)
    if not path.is_file():
        raise ManifestError(f"{path}: no such manifest")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise ManifestError(f"{path}: not a JSON Lines manifest (binary or not UTF-8 text)") from None
    utterances = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise TypeError(f"a line must be a JSON object, not {type(row).__name__}")
            utterances.append(Utterance(path.parent / row["audio"], float(row.get("duration", 0.0)),
                                        str(row.get("text", "")), str(row.get("speaker", "")),
                                        str(row.get("split", ""))))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise ManifestError(f"{path}:{number}: broken manifest line ({type(err).__name__}: {err})") from None
    return [u for u in utterances if not split or u.split in ("", split)]


def write_manifest(path: str | Path, rows: list[dict]) -> None:
    """Write rows as JSON Lines (atomic: a temp file renamed into place)."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(json.dumps(row) + "\n" for row in rows))
    tmp.replace(path)
