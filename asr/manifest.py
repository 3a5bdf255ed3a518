"""Build a manifest from your own recordings.

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

import sys
from pathlib import Path

from asr import cli
from asr.audio import interrupt
from asr.corpus import build
from asr.corpus.manifest import write_manifest


@interrupt.handled("manifest")
def main(argv: list[str] | None = None) -> int:
    parser = cli.new_parser("asr.manifest", __doc__)
    parser.add_argument("folder", nargs="?", type=Path, help="a folder of audio files with transcripts beside them")
    parser.add_argument("--table", type=Path, help="a CSV or TSV file of audio paths and text instead of a folder")
    parser.add_argument("--out", type=Path, required=True, help="the manifest to write (JSON Lines)")
    parser.add_argument("--audio-root", type=Path,
                        help="--table: the folder its paths are relative to (default: the table's, or its clips/)")
    parser.add_argument("--path-column",
                        help=f"--table: the audio paths' column (default: {'/'.join(build.PATH_COLUMNS)})")
    parser.add_argument("--text-column", help=f"--table: the text's column (default: {'/'.join(build.TEXT_COLUMNS)})")
    parser.add_argument("--speaker-column", help="--table: the speakers' column "
                                                 f"(default: {'/'.join(build.SPEAKER_COLUMNS)} if there is one)")
    args = parser.parse_args(argv)
    table_options = [args.audio_root, args.path_column, args.text_column, args.speaker_column]
    if (args.folder is None) == (args.table is None):
        cli.error(build.TOOL, "give a FOLDER or --table FILE (one of them)")
        return 2
    if args.folder is not None and any(option is not None for option in table_options):
        cli.error(build.TOOL, "--audio-root and the --*-column options go with --table, not a FOLDER")
        return 2
    report, out_dir = build.Report(), args.out.parent
    try:
        if args.folder is not None:
            rows = build.folder_rows(args.folder, out_dir, report)
        else:
            rows = build.table_rows(args.table, out_dir, report, args.audio_root, args.path_column,
                                    args.text_column, args.speaker_column)
    except build.BuildError as err:
        cli.error(build.TOOL, err)
        return 1
    if not rows:
        cli.error(build.TOOL, f"no usable utterance in {args.folder or args.table}; {args.out} not written")
        return 1
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        write_manifest(args.out, rows)
    except OSError as err:
        cli.error(build.TOOL, f"{args.out}: cannot write ({err.strerror or err})")
        return 1
    print(report.summary(args.out, rows), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
