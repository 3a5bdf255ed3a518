"""Build a manifest from your own recordings (run as `python -m asr.manifest`).

    python -m asr.manifest FOLDER --out train.jsonl
    python -m asr.manifest --table validated.tsv --out train.jsonl [--audio-root DIR]
                           [--path-column path] [--text-column sentence] [--speaker-column client_id]

FOLDER: audio files found recursively, each with its transcript beside it in STEM.txt or STEM.lab
(plain text, any case and punctuation); the first folder under FOLDER names the speaker.
--table: a CSV (.csv) or TSV (.tsv) file with a header row: a column of audio paths (relative to
--audio-root, default the table's folder, or its clips/ folder as in Common Voice) and one of text;
by default the first of path/audio/file and of sentence/text/transcript, and client_id or speaker
as the speaker. The manifest gets `audio` relative to its own folder, `duration` from each file's
header, `text` as written, and `speaker`. Unreadable audio, audio without a transcript, empty
transcripts and transcripts without audio are reported on stderr, one line each, then a summary;
the exit status is 1 when no utterance is usable.
"""
from __future__ import annotations

import csv
import sys
from collections import Counter
from pathlib import Path

from asr import cli, interrupt
from asr.audio import AUDIO_SUFFIXES, AudioError, audio_duration
from asr.manifest import relative_audio, write_manifest
from asr.text import normalize

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


@interrupt.handled("manifest")
def main(argv: list[str] | None = None) -> int:
    parser = cli.new_parser("asr.manifest", __doc__)
    parser.add_argument("folder", nargs="?", type=Path, help="a folder of audio files with transcripts beside them")
    parser.add_argument("--table", type=Path, help="a CSV or TSV file of audio paths and text instead of a folder")
    parser.add_argument("--out", type=Path, required=True, help="the manifest to write (JSON Lines)")
    parser.add_argument("--audio-root", type=Path,
                        help="--table: the folder its paths are relative to (default: the table's, or its clips/)")
    parser.add_argument("--path-column", help=f"--table: the audio paths' column (default: {'/'.join(PATH_COLUMNS)})")
    parser.add_argument("--text-column", help=f"--table: the text's column (default: {'/'.join(TEXT_COLUMNS)})")
    parser.add_argument("--speaker-column",
                        help=f"--table: the speakers' column (default: {'/'.join(SPEAKER_COLUMNS)} if there is one)")
    args = parser.parse_args(argv)
    table_options = [args.audio_root, args.path_column, args.text_column, args.speaker_column]
    if (args.folder is None) == (args.table is None):
        cli.error(TOOL, "give a FOLDER or --table FILE (one of them)")
        return 2
    if args.folder is not None and any(option is not None for option in table_options):
        cli.error(TOOL, "--audio-root and the --*-column options go with --table, not a FOLDER")
        return 2
    report, out_dir = Report(), args.out.parent
    try:
        if args.folder is not None:
            rows = folder_rows(args.folder, out_dir, report)
        else:
            rows = table_rows(args.table, out_dir, report, args.audio_root, args.path_column, args.text_column,
                              args.speaker_column)
    except BuildError as err:
        cli.error(TOOL, err)
        return 1
    if not rows:
        cli.error(TOOL, f"no usable utterance in {args.folder or args.table}; {args.out} not written")
        return 1
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        write_manifest(args.out, rows)
    except OSError as err:
        cli.error(TOOL, f"{args.out}: cannot write ({err.strerror or err})")
        return 1
    print(report.summary(args.out, rows), file=sys.stderr)
    return 0
