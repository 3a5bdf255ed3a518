"""Batch transcription through the streaming path.

    python -m asr.transcribe AUDIO_OR_DIR_OR_MANIFEST... [--model PATH]
                             [--format txt|json|srt|vtt] [--output-dir DIR]

Inputs: audio files (wav/flac/ogg..., any rate, mono or stereo, any length), folders (searched
recursively for audio) and manifests (*.jsonl). Files are read block-wise and resampled
block-wise exactly (asr.audio.read_blocks), so an hour-long file needs little memory.
Without --output-dir the results go to stdout (txt: the text alone for one file, FILE<TAB>TEXT
lines for several; json: one object a line). A failed file gives one error line on stderr;
the others are still transcribed, a summary names the failures and the exit status is 1.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np
import soundfile as sf
from tqdm import tqdm

from asr import cli
from asr.audio import AUDIO_SUFFIXES, SAMPLE_RATE, AudioError, read_blocks, rechunk
from asr.decoding.beam import LMError
from asr.decoding.decoder import Decoder
from asr.endpoint import EndpointConfig, emissions
from asr.manifest import ManifestError, read_manifest
from asr.model.backend import ModelError
from asr.outputs import FORMATS, Segment, Transcript, render
from asr.recognizer import Recognizer

MANIFEST_SUFFIXES = (".jsonl",)
PROGRESS_SECONDS = 60.0  # show a progress bar (on a terminal) for at least this much audio...
PROGRESS_FILES = 5  # ...or this many files


def expand_inputs(items: Iterable[str]) -> tuple[list[Path], list[str]]:
    """Files, folders and manifests -> (audio files in order, error lines for unusable inputs)."""
    files: list[Path] = []
    errors: list[str] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in AUDIO_SUFFIXES)
            if not found:
                errors.append(f"{path}: no audio files in this directory (looked for {' '.join(AUDIO_SUFFIXES)})")
            files.extend(found)
        elif path.suffix.lower() in MANIFEST_SUFFIXES:
            try:
                utterances = read_manifest(path)
            except ManifestError as err:
                errors.append(str(err))
                continue
            if not utterances:
                errors.append(f"{path}: manifest lists no utterances")
            files.extend(u.audio for u in utterances)
        else:
            files.append(path)  # a missing or unreadable file fails when it is read
    return files, errors


def transcribe_file(recognizer: Recognizer, path: Path, chunk_samples: int = 32000,
                    progress: Callable[[float], None] | None = None, decoder: Decoder | None = None,
                    endpoint: EndpointConfig | None = None) -> Transcript:
    """One file through the streaming recognizer, endpointer and decoder (greedy if none is given);
    raises AudioError."""
    samples = 0

    def counted(chunks: Iterable[np.ndarray]) -> Iterator[np.ndarray]:
        nonlocal samples
        for chunk in chunks:
            samples += chunk.size
            if progress:
                progress(chunk.size / SAMPLE_RATE)
            yield chunk

    began = time.perf_counter()
    chunks = counted(rechunk(read_blocks(path), chunk_samples))
    segments = [Segment(e.start, e.end, e.text, e.words, e.plain or "")
                for e in emissions(recognizer, chunks, decoder, endpoint) if e.is_final]
    duration = samples / SAMPLE_RATE
    rtf = (time.perf_counter() - began) / duration if duration else 0.0
    return Transcript(str(path), " ".join(s.text for s in segments), duration, segments, rtf)


def _duration(path: Path) -> float:
    try:
        return sf.info(str(path)).duration
    except Exception:  # unreadable files are reported when they are transcribed
        return 0.0


def _output_name(path: Path, fmt: str, used: set[str]) -> str:
    """DIR-relative output name: stem.fmt, else name.fmt, else a numbered name if taken."""
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
    cli.add_decoder_args(parser)
    cli.add_endpoint_args(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    files, errors = expand_inputs(args.inputs)
    for error in errors:
        cli.error("transcribe", error)
    if not files:
        return 1
    try:
        recognizer = cli.load_recognizer(args)
        decoder = cli.load_decoder(args, recognizer)
        if args.output_dir:
            args.output_dir.mkdir(parents=True, exist_ok=True)
    except (ModelError, LMError, ValueError, OSError) as err:
        cli.error("transcribe", err)
        return 1
    endpoint = cli.endpoint_config(args)
    chunk_samples = cli.chunk_samples(args.chunk_ms)
    total = sum(_duration(f) for f in files)
    show_bar = sys.stderr.isatty() and (total >= PROGRESS_SECONDS or len(files) >= PROGRESS_FILES)
    failed: list[str] = []
    used: set[str] = set()
    with tqdm(total=round(total, 1), unit="s", disable=not show_bar, leave=False, file=sys.stderr,
              bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s audio [{elapsed}<{remaining}]") as bar:
        for path in files:
            bar.set_description(path.name[-30:])
            try:
                result = transcribe_file(recognizer, path, chunk_samples, bar.update, decoder, endpoint)
            except AudioError as err:
                tqdm.write(f"asr.transcribe: error: {err}", file=sys.stderr)
                failed.append(str(path))
                continue
            text = render(result, args.format)
            if args.output_dir:
                (args.output_dir / _output_name(path, args.format, used)).write_text(text)
            elif args.format == "txt" and len(files) > 1:
                tqdm.write(f"{path}\t{result.text}", file=sys.stdout)
            else:
                tqdm.write(text.rstrip("\n"), file=sys.stdout)
    failed_inputs = len(failed) + len(errors)
    if failed_inputs:
        names = ", ".join(failed + [e.split(": ")[0] for e in errors])
        print(f"asr.transcribe: {failed_inputs} input(s) failed, {len(files) - len(failed)} transcribed; "
              f"failed: {names}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
