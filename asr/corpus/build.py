"""A manifest from your own recordings: a folder of audio files with transcripts beside them, or a CSV/TSV
table of audio paths and text (`python -m asr.manifest`, whose help says how each is read).

Each usable utterance becomes a row (`manifest_row`); what could not be used is reported on stderr, one line
each, and counted in the `Report`.
"""
from __future__ import annotations

import csv
import sys
from collections import Counter
from pathlib import Path

from asr.audio import AudioError
from asr.audio.files import AUDIO_SUFFIXES, audio_duration
from asr.corpus.manifest import relative_audio
from asr.text.normalize import normalize

TOOL = "manifest"
TRANSCRIPT_SUFFIXES = (".txt", ".lab")  # tried in this order beside each audio file
PATH_COLUMNS = ("path", "audio", "file")  # --path-column's default: the first of these in the header
TEXT_COLUMNS = ("sentence", "text", "transcript")
SPEAKER_COLUMNS = ("client_id", "speaker")
DELIMITERS = {".csv": ",", ".tsv": "\t"}


class BuildError(Exception):
    """Input that cannot be used at all (a missing folder, a table without the columns); one line."""


class Report:
    """Problems met while building: one stderr line each as they happen, counted by kind."""

    def __init__(self) -> None:
        self.skipped: Counter[str] = Counter()  # utterances left out, by kind
        self.orphans = 0  # transcripts without audio (no utterance lost)

    def skip(self, kind: str, line: str) -> None:
        self.skipped[kind] += 1
        print(f"asr.{TOOL}: skipped: {line}", file=sys.stderr)

    def orphan(self, transcript: Path) -> None:
        self.orphans += 1
        print(f"asr.{TOOL}: {transcript}: transcript without audio", file=sys.stderr)

    def summary(self, out: Path, rows: list[dict]) -> str:
        hours = sum(r["duration"] for r in rows) / 3600
        speakers = len({r["speaker"] for r in rows if "speaker" in r})
        kinds = ", ".join(f"{count} {kind}" for kind, count in self.skipped.most_common())
        orphans = f"; {self.orphans} transcripts without audio" if self.orphans else ""
        return (f"asr.{TOOL}: wrote {out}: {len(rows)} utterances, {hours:.2f} h, {speakers} speakers; "
                f"{sum(self.skipped.values())} skipped{f' ({kinds})' if kinds else ''}{orphans}")


def manifest_row(audio: Path, text: str, speaker: str, out_dir: Path, report: Report,
                 table_row: str | None = None) -> dict | None:
    """One manifest row, or None (reported, naming `table_row`, FILE:LINE, when it came from a table) when
    the text says nothing or the audio cannot be read."""
    text = " ".join(text.split())
    if not normalize(text):
        report.skip("empty transcript", f"{table_row or audio}: empty transcript (nothing to say once normalised)")
        return None
    try:
        duration = audio_duration(audio)
    except AudioError as err:  # its message names the audio file
        report.skip("unreadable audio" if audio.is_file() else "missing audio",
                    f"{table_row}: {err}" if table_row else str(err))
        return None
    row = {"audio": relative_audio(audio, out_dir), "duration": round(duration, 3), "text": text}
    return {**row, "speaker": speaker} if speaker else row


def folder_rows(folder: Path, out_dir: Path, report: Report) -> list[dict]:
    """Rows for the audio files under `folder` with a STEM.txt or STEM.lab beside them."""
    if not folder.is_dir():
        raise BuildError(f"{folder}: no such folder")
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    audios = [p for p in files if p.suffix.lower() in AUDIO_SUFFIXES]
    stems = {p.with_suffix("") for p in audios}
    rows = []
    for audio in audios:
        transcript = next((t for t in map(audio.with_suffix, TRANSCRIPT_SUFFIXES) if t.is_file()), None)
        if transcript is None:
            names = " or ".join(audio.stem + suffix for suffix in TRANSCRIPT_SUFFIXES)
            report.skip("no transcript", f"{audio}: no transcript beside it ({names})")
            continue
        try:
            text = transcript.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError:
            report.skip("unreadable transcript", f"{transcript}: not UTF-8 text")
            continue
        parts = audio.relative_to(folder).parts
        if (row := manifest_row(audio, text, parts[0] if len(parts) > 1 else "", out_dir, report)):
            rows.append(row)
    for path in files:
        if path.suffix.lower() in TRANSCRIPT_SUFFIXES and path.with_suffix("") not in stems:
            report.orphan(path)
    return rows


def pick_column(header: list[str], given: str | None, candidates: tuple[str, ...], what: str, table: Path,
                required: bool = True) -> str | None:
    """The column named `given`, else the first of `candidates` in the header (BuildError if none is there
    and the column is `required` or was `given`)."""
    columns = ", ".join(header)
    if given:
        if given not in header:
            raise BuildError(f"{table}: no column {given!r} (columns: {columns})")
        return given
    found = next((name for name in candidates if name in header), None)
    if found is None and required:
        raise BuildError(f"{table}: no {what} column ({' or '.join(candidates)}; columns: {columns}); "
                         f"name it with --{what}-column")
    return found


def default_audio_root(table: Path, first_path: str) -> Path:
    """The table's folder, or its clips/ folder where the first row's audio is (as in Common Voice)."""
    clips = table.parent / "clips"
    if first_path and not (table.parent / first_path).exists() and (clips / first_path).exists():
        return clips
    return table.parent


def table_rows(table: Path, out_dir: Path, report: Report, audio_root: Path | None = None,
               path_column: str | None = None, text_column: str | None = None,
               speaker_column: str | None = None) -> list[dict]:
    """Rows for a CSV/TSV table of audio paths and text (Common Voice's validated.tsv as it ships)."""
    if not table.is_file():
        raise BuildError(f"{table}: no such table")
    delimiter = DELIMITERS.get(table.suffix.lower())
    if delimiter is None:
        raise BuildError(f"{table}: not a table (expected a .csv or .tsv file)")
    # Common Voice's TSV quotes nothing, and a sentence may hold a lone '"': read TSV fields as they are.
    quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
    try:
        with table.open(encoding="utf-8-sig", newline="") as f:
            lines = list(csv.reader(f, delimiter=delimiter, quoting=quoting))
    except (UnicodeDecodeError, csv.Error) as err:
        raise BuildError(f"{table}: not a readable {table.suffix[1:].upper()} table ({err})") from None
    if not lines:
        raise BuildError(f"{table}: empty table")
    header, body = lines[0], lines[1:]
    columns = [pick_column(header, path_column, PATH_COLUMNS, "path", table),
               pick_column(header, text_column, TEXT_COLUMNS, "text", table),
               pick_column(header, speaker_column, SPEAKER_COLUMNS, "speaker", table, required=False)]
    indices = [header.index(name) if name else None for name in columns]
    if audio_root is None:
        audio_root = default_audio_root(table, body[0][indices[0]] if body and len(body[0]) > indices[0] else "")
    rows = []
    for number, fields in enumerate(body, start=2):
        where = f"{table}:{number}"
        if len(fields) != len(header):
            report.skip("broken table row", f"{where}: {len(fields)} fields where the header has {len(header)}")
            continue
        path, text, speaker = (fields[i] if i is not None else "" for i in indices)
        if (row := manifest_row(audio_root / path, text, speaker, out_dir, report, table_row=where)):
            rows.append(row)
    return rows
