"""Batch transcription through the streaming path.

    python -m asr.transcribe AUDIO_OR_DIR_OR_MANIFEST... [--model PATH]
                             [--format txt|json|srt|vtt] [--output-dir DIR]

Inputs: audio and video files (wav/flac/mp3/m4a/mp4/webm..., anything ffmpeg reads; any rate, mono or
stereo, any length), `-` for standard input, folders (searched recursively for audio) and manifests
(*.jsonl). Files are read block-wise and resampled
block-wise exactly (asr.audio.files.read_blocks), so an hour-long file needs little memory.
Without --output-dir the results go to stdout (txt: the text alone for one file, FILE<TAB>TEXT
lines for several; json: one object a line, naming its file in "audio"; srt and vtt: one file only, since
subtitle files run together are no subtitle file: several need --output-dir). A failed file gives one error
line on stderr; the others are still transcribed, a summary names the failures and the exit status is 1.
`--ray [ADDRESS] ... --output-dir DIR` runs the same on a Ray cluster, in resumable shards (asr/batch/cluster.py).
"""
from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Iterable

from asr import cli
from asr.cli import checks
from asr.audio import AudioError, interrupt
from asr.audio.files import AUDIO_SUFFIXES, audio_duration
from asr.batch import cluster
from asr.batch.files import transcribed
from asr.batch.processes import StartError
from asr.corpus.manifest import ManifestError, read_manifest
from asr.decoding.beam import LMError
from asr.model.errors import ModelError
from asr.text.formats import FORMATS

MANIFEST_SUFFIXES = (".jsonl",)
PROGRESS_SECONDS = 60.0  # show a progress bar (on a terminal) for at least this much audio...
PROGRESS_FILES = 5  # ...or this many files


def expand_inputs(items: Iterable[str]) -> tuple[list[Path], list[float], list[str]]:
    """Files, folders and manifests -> (audio files in order, their seconds, error lines for unusable inputs).
    A file's seconds are its manifest row's duration, else its header's (0 for standard input or a file that
    cannot be read, which is reported when it is transcribed): read once, for the progress bar and the sort."""
    files: list[Path] = []
    known: list[float | None] = []  # a manifest's durations, None elsewhere
    errors: list[str] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in AUDIO_SUFFIXES)
            if not found:
                errors.append(f"{path}: no audio files in this directory (looked for {' '.join(AUDIO_SUFFIXES)})")
            files.extend(found)
            known.extend([None] * len(found))
        elif path.suffix.lower() in MANIFEST_SUFFIXES:
            try:
                utterances = read_manifest(path, text=False)  # no text is needed
            except ManifestError as err:
                errors.append(str(err))
                continue
            if not utterances:
                errors.append(f"{path}: manifest lists no utterances")
            files.extend(u.audio for u in utterances)
            known.extend(u.duration for u in utterances)
        else:
            files.append(path)  # a missing or unreadable file fails when it is read
            known.append(None)
    return files, [_duration(f) if s is None else s for f, s in zip(files, known)], errors


def _duration(path: Path) -> float:
    """Seconds of audio from the file's header (0 for stdin or an unreadable file)."""
    try:
        return 0.0 if str(path) == "-" else audio_duration(path)
    except AudioError:
        return 0.0


def _output_name(path: Path, fmt: str, used: set[str]) -> str:
    """DIR-relative output name: stem.fmt, else name.fmt, else a numbered name if taken."""
    path = Path("stdin") if str(path) == "-" else path
    for name in (f"{path.stem}.{fmt}", f"{path.name}.{fmt}"):
        if name not in used:
            break
    number = 1
    while name in used:
        name, number = f"{path.stem}-{number}.{fmt}", number + 1
    used.add(name)
    return name


def _parser() -> argparse.ArgumentParser:
    parser = cli.new_parser("asr.transcribe", __doc__)
    parser.add_argument("inputs", nargs="+", metavar="AUDIO_OR_DIR_OR_MANIFEST")
    cli.add_model_args(parser)
    parser.add_argument("--format", choices=FORMATS, default="txt", help="output format (default txt)")
    parser.add_argument("--output-dir", type=Path, help="write one FILE.<format> per input here")
    cli.add_chunk_ms(parser, 2000.0, "audio per recognizer step in ms (speed only; default 2000)")
    cli.add_batch_seconds(parser)
    cli.add_jobs(parser)
    cli.add_decoder_args(parser)
    cli.add_endpoint_args(parser)
    cluster.add_args(parser)
    return parser


@cli.quiet_when_piped_output_closes
@interrupt.handled("transcribe")
def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(cluster.address_flag(sys.argv[1:] if argv is None else argv))
    try:  # the options before anything is read or loaded
        checks.options(args)
        if args.jobs > 1 and "-" in args.inputs:
            raise ValueError("--jobs reads files, not standard input ('-'): use one job for it")
        if args.output_dir and args.ray is None:  # a Ray job makes it after its own checks (cluster.run)
            cli.make_output_dir(args.output_dir)
    except (ValueError, OSError) as err:
        cli.error("transcribe", err)
        return 1
    files, seconds, errors = expand_inputs(args.inputs)
    if args.format in ("srt", "vtt") and not args.output_dir and len(files) > 1:
        parser.error(f"--format {args.format} of {len(files)} files to standard output would run their subtitles "
                     "together into one invalid file: give --output-dir DIR (one file each)")
    files, seconds, missing = usable(files, seconds)  # a missing file is said now, not after the model loads
    for error in errors + missing:
        cli.error("transcribe", error)
    errors += missing
    if not files:
        return _summary(errors, [], 0)
    if args.ray is not None:  # the job on a Ray cluster (asr/batch/cluster.py)
        return 1 if errors else cluster.run(args, files)
    try:
        model = cli.load_transcriber(args)
    except (ModelError, LMError, ValueError, OSError) as err:
        cli.error("transcribe", err)
        return 1
    total = sum(seconds)
    show_bar = sys.stderr.isatty() and (total >= PROGRESS_SECONDS or len(files) >= PROGRESS_FILES)
    failed: list[str] = []
    used: set[str] = set()
    results = None
    try:
        with _progress(show_bar, total) as (update, write):
            results = transcribed(model, files, args, update, seconds)
            for path, result in results:
                if isinstance(result, AudioError):
                    write(f"asr.transcribe: error: {result}", sys.stderr)
                    failed.append(str(path))
                    continue
                text = result.render(args.format)
                if args.output_dir:
                    (args.output_dir / _output_name(path, args.format, used)).write_text(text)
                elif args.format == "txt" and len(files) > 1:
                    write(f"{path}\t{result.text}", sys.stdout)
                else:
                    write(text.rstrip("\n"), sys.stdout)
    except StartError as err:  # a spawned --jobs worker could not load what the options ask for
        cli.error("transcribe", err)
        return 1
    finally:
        if results is not None:
            results.close()  # at Ctrl-C too: the --jobs pool is stopped here
    return _summary(errors, failed, len(files) - len(failed))


@contextlib.contextmanager
def _progress(show: bool, seconds: float):
    """(update, write): `update(seconds heard)` moves a progress bar on standard error, and `write(line, stream)`
    prints a line (flushed, so a pipe gets each file's text when it is done) above it. tqdm is imported only
    where the bar shows (a terminal and a long job): its import costs a start 30-45 ms."""
    if not show:
        def write(line: str, stream) -> None:
            print(line, file=stream, flush=True)
        yield (lambda heard: None), write
        return
    from tqdm import tqdm

    with tqdm(total=round(seconds / 3600, 4), leave=False, file=sys.stderr,
              bar_format="{bar}| {n:.2f}/{total:.2f} h audio [{elapsed}<{remaining}]") as bar:
        def write(line: str, stream) -> None:
            tqdm.write(line, file=stream)
            stream.flush()
        yield (lambda heard: bar.update(heard / 3600)), write


def usable(files: list[Path], seconds: list[float]) -> tuple[list[Path], list[float], list[str]]:
    """The files that can be opened, their seconds, and an error line for each of the others
    (`asr.cli.checks.audio_file`: missing, a folder, empty, not readable)."""
    kept: list[tuple[Path, float]] = []
    errors: list[str] = []
    for path, length in zip(files, seconds):
        try:
            checks.audio_file(path)
            kept.append((path, length))
        except checks.InputError as err:
            errors.append(str(err))
    return [p for p, _ in kept], [s for _, s in kept], errors


def _summary(errors: list[str], failed: list[str], transcribed: int) -> int:
    """The exit status; with failures, first a line that counts and names them (the inputs refused at the start,
    `errors`, and the files that failed as they were read, `failed`)."""
    if not errors and not failed:
        return 0
    names = ", ".join(failed + [e.split(": ")[0] for e in errors])
    print(f"asr.transcribe: {len(failed) + len(errors)} input(s) failed, {transcribed} transcribed; "
          f"failed: {names}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
