"""Streaming recognition from a file or the microphone, through one emission loop.

    python -m asr.stream --file AUDIO [--realtime] [--json] [--chunk-ms 500] [--compare-offline]
    python -m asr.stream --mic [--device N|NAME] [--json] [--max-seconds S]
    python -m asr.stream --list-devices
    (and the model, decoder and endpoint options below)

Audio is cut into chunks of exactly --chunk-ms whatever the source delivers, so a file and a
microphone that hear the same samples print the same results. On a terminal the current
segment's line is redrawn after every chunk and a newline ends each final segment; otherwise
each final segment is one plain line. --json prints one object per emission instead.
"""
from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import time
from typing import Callable, Iterable, Iterator, TextIO

import numpy as np

from asr import cli
from asr.cli import checks
from asr.audio import SAMPLE_RATE, AudioError, interrupt
from asr.audio.chunks import rechunk
from asr.audio.files import load_audio, read_blocks
from asr.decoding.beam import LMError
from asr.decoding.ctc import greedy_decode
from asr.decoding.endpoint import Emission
from asr.model.errors import ModelError
from asr.model.recognizer import Recognizer


def paced(chunks: Iterable[np.ndarray]) -> Iterator[np.ndarray]:
    """Release each chunk no earlier than a microphone would have delivered it."""
    began, samples = time.monotonic(), 0
    for chunk in chunks:
        samples += chunk.size
        time.sleep(max(0.0, began + samples / SAMPLE_RATE - time.monotonic()))
        yield chunk


class LineDisplay:
    """Terminal output: redraw the open segment in place on a TTY; plain final lines otherwise."""

    def __init__(self, out: TextIO, tty: bool):
        self.out, self.tty = out, tty
        self.open = False  # a partial's line is on the terminal, not yet ended

    def show(self, emission: Emission) -> None:
        if self.tty:  # a partial shows the tail that fits on one line; a final shows everything
            width = max(10, shutil.get_terminal_size().columns - 1)
            text = emission.text + "\n" if emission.is_final else emission.text[-width:]
            self.out.write("\r\033[K" + text)
        elif emission.is_final:
            self.out.write(emission.text + "\n")
        self.out.flush()
        self.open = self.tty and not emission.is_final

    def end_line(self) -> None:
        """End a partial's line on a TTY, so that what follows starts a line of its own."""
        if self.open:
            self.out.write("\n")
            self.out.flush()
            self.open = False


def compare_offline(recognizer: Recognizer, wave: np.ndarray, chunk_samples: int) -> tuple[float, int]:
    """Max |streamed - offline| log-prob and the number of differing greedy tokens."""
    streamed = recognizer.run(wave, chunk_samples)
    offline = recognizer.offline_logprobs(wave)
    if streamed.shape != offline.shape:
        raise AssertionError(f"streamed {tuple(streamed.shape)} != offline {tuple(offline.shape)}")
    diff = float(np.abs(streamed - offline).max()) if offline.size else 0.0
    a, b = greedy_decode(streamed), greedy_decode(offline)
    mismatches = sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b))
    return diff, mismatches


def _parser() -> argparse.ArgumentParser:
    parser = cli.new_parser("asr.stream", __doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--file", help="audio or video file fed through the streaming path (- : standard input, "
                                        "decoded as it arrives)")
    source.add_argument("--mic", action="store_true", help="live input (16 kHz mono int16 via PortAudio)")
    source.add_argument("--list-devices", action="store_true", help="list audio devices and exit")
    parser.add_argument("--device", dest="mic_device", metavar="N|NAME", help="input device number or name (default: the system default)")
    cli.add_model_args(parser, device=False)  # --device is the microphone's here: the model runs on the CPU
    cli.add_chunk_ms(parser, 500.0, "audio per step in ms (default 500)")
    parser.add_argument("--json", action="store_true", help="one JSON object per emission")
    parser.add_argument("--realtime", action="store_true", help="with --file: release each chunk when a "
                                                                "microphone would have delivered it")
    parser.add_argument("--max-seconds", type=cli.positive_float, help="stop after this many seconds of audio")
    cli.add_decoder_args(parser)
    cli.add_endpoint_args(parser)
    parser.add_argument("--compare-offline", action="store_true",
                        help="with --file: also run the whole-utterance forward and print the differences")
    return parser


@cli.quiet_when_piped_output_closes
@interrupt.handled("stream", finish=True)
def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.file is None and (args.realtime or args.compare_offline):
        parser.error("--realtime and --compare-offline need --file")
    if args.file == "-" and args.compare_offline:
        parser.error("--compare-offline reads the file twice: it needs a file, not standard input (-)")
    from asr.audio import microphone  # sounddevice itself is imported only when a device is used
    if args.list_devices:
        try:
            print(microphone.list_devices())
        except microphone.NoDeviceError as err:
            cli.error("stream", err)
            return 2
        return 0
    try:  # the options and the file before anything loads
        checks.options(args)
        if args.file is not None:
            checks.audio_file(args.file)
    except ValueError as err:
        cli.error("stream", err)
        return 1
    try:
        model = cli.load_transcriber(args)
    except (ModelError, LMError, ValueError, OSError) as err:
        cli.error("stream", err)
        return 1
    chunk_samples = cli.chunk_samples(args.chunk_ms)
    max_samples = None if args.max_seconds is None else round(args.max_seconds * SAMPLE_RATE)
    display = LineDisplay(sys.stdout, sys.stdout.isatty())

    def show(chunks: Iterable[np.ndarray], pace: bool = False) -> None:
        chunks = rechunk(chunks, chunk_samples, max_samples)
        for emission in model.emissions(paced(chunks) if pace else chunks):
            if args.json:
                print(json.dumps(emission.to_json()), flush=True)
            else:
                display.show(emission)

    if args.mic:
        return _run_mic(args, show)
    try:
        show(read_blocks(args.file), pace=args.realtime)
        if interrupt.STOP.is_set():  # Ctrl-C ended the input: the finals of what was heard are out
            display.end_line()
            return 0
        if args.compare_offline:
            diff, mismatches = compare_offline(model.recognizer, load_audio(args.file), chunk_samples)
            print(f"max_abs_diff={diff:.3g} token_mismatches={mismatches}")
    except AudioError as err:
        if display.tty:
            print(file=sys.stderr)
        cli.error("stream", err)
        return 1
    return 0


def _run_mic(args: argparse.Namespace, show: Callable[[Iterable[np.ndarray]], None]) -> int:
    """Live input until Ctrl-C (or --max-seconds); the open segment is closed on the way out."""
    from asr.audio import microphone
    try:
        mic = microphone.Microphone(args.mic_device, max_seconds=args.max_seconds)
        with mic:
            print(f"asr.stream: listening on {mic.name} (16 kHz mono); Ctrl-C to stop", file=sys.stderr)
            previous = signal.signal(signal.SIGINT, lambda *_: (interrupt.STOP.set(), mic.stop()))  # exit 130
            try:
                show(mic.chunks())
            finally:
                signal.signal(signal.SIGINT, previous)
    except microphone.NoDeviceError as err:
        cli.error("stream", err)
        return 2
    except microphone.MicrophoneError as err:
        cli.error("stream", err)
        return 1
    if mic.overflows:
        print(f"asr.stream: warning: {mic.overflows} input overflow(s): audio was lost", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
