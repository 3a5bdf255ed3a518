"""What the command-line tools share: model, decoder and endpoint options, and loading them.

Every tool decodes the same way by default: with the bundled model, a beam search with the bundled
word LM (`--greedy` turns it off); with another model, greedy CTC unless `--lm` names a word LM.
What the options name is checked before anything loads, in one place: `asr.cli.checks`.
"""
from __future__ import annotations

import argparse
import functools
import logging
import math
import os
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Callable

from asr import api
from asr.api import chunk_samples  # noqa: F401  (the tools' --chunk-ms in samples)
from asr.batch.padded import DEFAULT_BATCH_SECONDS
from asr.cli import checks
from asr.corpus.manifest import skipped_note
from asr.decoding.beam import BeamConfig
from asr.decoding.rescore import RescoreConfig
from asr.decoding.decoder import Decoder
from asr.decoding.endpoint import EndpointConfig
from asr.decoding.hotwords import DEFAULT_BOOST
from asr.model.backend import BACKENDS
from asr.model.folder import folder_lm
from asr.model.recognizer import Recognizer


def finite_float(text: str) -> float:
    """The argparse type of every float option of every tool: a number, refusing NaN and the infinities (which
    every comparison lets through: `--lm-weight nan` gave empty text)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return value


def _positive(kind: type):
    def parse(text: str):
        if kind is float:
            value = finite_float(text)
        else:
            try:
                value = kind(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0 (got {text})")
        return value
    return parse


def non_negative_float(text: str) -> float:
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 (got {text})")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 (got {text})")
    return value


def _unit_interval(text: str) -> float:
    value = finite_float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (got {text})")
    return value


positive_int, positive_float = _positive(int), _positive(float)


# A value that looks like a negative number, infinity or NaN ("-1", "-.5", "-1e3", "-inf") is a value, not an option
# (argparse's own pattern knows only "-1" and "-.5": `--word-score -inf` read as a missing value).
NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$|^-(inf|infinity|nan)$", re.IGNORECASE)


class Parser(argparse.ArgumentParser):
    """argparse with the tools' manners: a bad option is one line on stderr, `asr.TOOL: error: ...` with a pointer
    to --help (which alone prints the usage), exit status 2; negative numbers are values."""

    def __init__(self, tool: str, **kwargs):
        super().__init__(**kwargs)
        self.tool = tool
        self._negative_number_matcher = NEGATIVE_NUMBER

    def error(self, message: str):
        self.exit(2, f"{self.tool}: error: {message} (python -m {self.tool} --help lists the options)\n")


class ToolWarnings(logging.Handler):
    """The package's warnings (e.g. asr.audio's for a WAV file cut short) as `asr.TOOL: warning: ...` lines on the
    stderr of the moment."""

    def __init__(self, tool: str):
        super().__init__(logging.WARNING)
        self.tool = tool

    def emit(self, record: logging.LogRecord) -> None:
        print(f"{self.tool}: warning: {record.getMessage()}", file=sys.stderr)


def new_parser(module: str, doc: str | None) -> Parser:
    """The parser of `python -m <module>`, its docstring as the description (kept as written). Every tool makes
    it first thing, so this is also where its warnings are routed to stderr in its name (`ToolWarnings`)."""
    package = logging.getLogger("asr")
    package.handlers[:] = [h for h in package.handlers if not isinstance(h, ToolWarnings)] + [ToolWarnings(module)]
    return Parser(module, prog=f"python -m {module}", description=doc,
                  formatter_class=argparse.RawDescriptionHelpFormatter)


def add_model_args(parser: argparse.ArgumentParser, device: bool = True) -> None:
    """--model, --backend, --onnx-dir, --int8, --threads, and (unless `device` is False: asr.stream, whose
    --device is the microphone) --device."""
    parser.add_argument("--model", help="model file (.safetensors; with --backend onnx an exported folder), or a "
                                        "model folder (python -m asr.finetune writes one: its weights, export and "
                                        "word LM); default: the bundled model")
    parser.add_argument("--backend", choices=BACKENDS, default=None,
                        help="what runs the acoustic model: torch, or onnx (onnxruntime, no torch needed); "
                             "default: onnx for the bundled model where onnxruntime is installed (its export ships "
                             "with it and gives the same text, faster), torch for a .safetensors --model")
    parser.add_argument("--onnx-dir", help="an exported ONNX folder (python -m asr.export); implies --backend onnx")
    parser.add_argument("--int8", action="store_true",
                        help="the int8 graph of the ONNX export (the bundled model's unless --onnx-dir or --model "
                             "names a folder): smaller and faster, within a few tenths of a point of WER; "
                             "implies --backend onnx")
    parser.add_argument("--threads", type=positive_int, default=1,
                        help="CPU threads for the acoustic model (default 1: a 500 ms chunk is too small to "
                             "gain from more, and more fight other work on a busy machine)")
    if not device:
        return
    parser.add_argument("--device", default=None, metavar="cpu|cuda|cuda:N|auto",
                        help="where the acoustic model runs (torch backend; a GPU with the bundled model picks "
                             "torch): auto takes a CUDA GPU where torch sees one; the decoding stays on the CPU "
                             "(default cpu)")


def add_manifest_args(parser: argparse.ArgumentParser, required: bool = True) -> None:
    """--manifest (required unless told), the model options, --split, --limit and --skip-bad: tools that score a
    manifest."""
    parser.add_argument("--manifest", required=required, help="JSON Lines manifest with audio and text")
    add_model_args(parser)
    parser.add_argument("--split", default="", help="only the manifest rows of this split (e.g. test for FSDD)")
    parser.add_argument("--limit", type=positive_int, help="only the first N utterances")
    add_skip_bad(parser, "score")


def add_skip_bad(parser: argparse.ArgumentParser, verb: str) -> None:
    """--skip-bad: leave out the manifest lines `read_manifest` refuses (no usable text, broken JSON...) and
    `verb` the rest, saying how many were left out; without it the first such line is an error."""
    parser.add_argument("--skip-bad", action="store_true",
                        help=f"{verb} the rest of a manifest whose lines have no usable text (missing, null or "
                             "empty) or are otherwise broken, saying how many were left out (default: the first "
                             "such line is an error)")


def skipping(args: argparse.Namespace) -> list | None:
    """`read_manifest`'s `skipped` for the options: a list to collect the bad lines with --skip-bad, else None."""
    return [] if getattr(args, "skip_bad", False) else None


def note_skipped(tool: str, manifest: object, skipped: list | None) -> None:
    """One line on stderr for the lines --skip-bad left out of `manifest` (none: nothing)."""
    if skipped:
        print(f"asr.{tool}: {skipped_note(manifest, skipped)}", file=sys.stderr)


def add_chunk_ms(parser: argparse.ArgumentParser, default: float, help: str) -> None:
    """Add --chunk-ms (milliseconds of audio per recognizer step, > 0)."""
    parser.add_argument("--chunk-ms", type=positive_float, default=default, help=help)


def add_batch_seconds(parser: argparse.ArgumentParser) -> None:
    """--batch-seconds: whole files stepped side by side in padded batches (asr.batch.padded); 0 for one file at a
    time."""
    parser.add_argument("--batch-seconds", type=non_negative_float, default=DEFAULT_BATCH_SECONDS, metavar="S",
                        help="files sorted by length and stepped side by side, S seconds of audio per encoder call "
                             f"(same text; default {DEFAULT_BATCH_SECONDS:g}); 0: one file at a time, in --chunk-ms steps")


def add_jobs(parser: argparse.ArgumentParser) -> None:
    """--jobs: the batches in N worker processes (asr.batch.processes), for asr.transcribe and asr.evaluate alike."""
    parser.add_argument("--jobs", type=positive_int, default=1, metavar="N",
                        help="the batches in N processes, one core each (asr.batch.processes; the same text; "
                             "default 1)")


def add_decoder_args(parser: argparse.ArgumentParser) -> None:
    """--greedy / --beam / --lm and the beam search's weights."""
    defaults = BeamConfig()
    parser.add_argument("--greedy", action="store_true", help="greedy CTC, no word LM (a phone model spells no words "
                        "greedily: it searches its pronunciation lexicon without an LM instead)")
    parser.add_argument("--beam", action="store_true",
                        help="beam search with the bundled word LM (the default with the bundled model; a model "
                             "folder with its own lm.arpa searches with that)")
    parser.add_argument("--lm", help="beam search with this ARPA word LM (python -m asr.training.lm) instead")
    parser.add_argument("--beam-size", type=positive_int, default=defaults.beam_size, help="beam width (with an LM)")
    parser.add_argument("--beam-threshold", type=finite_float, default=defaults.beam_threshold,
                        help="prune hypotheses this far below the best (with an LM)")
    parser.add_argument("--token-beam", type=positive_int, default=defaults.token_beam,
                        help="units a hypothesis may extend by at each frame, the likeliest (with an LM; "
                             f"default {defaults.token_beam or 'all'})")
    parser.add_argument("--lm-weight", type=finite_float, default=defaults.lm_weight, help="LM weight (with an LM)")
    parser.add_argument("--word-score", type=finite_float, default=defaults.word_score, help="score per word (with an LM)")
    parser.add_argument("--lexicon-words", type=positive_int, default=defaults.lexicon_words,
                        help="the LM's N most probable words make the search's lexicon "
                             f"(default {defaults.lexicon_words or 'all of them'}; more than the LM has: all of them)")
    second = RescoreConfig()
    parser.add_argument("--no-rescore", action="store_true",
                        help="finals from the first pass alone (no second pass with another LM; partials are "
                             "always first-pass)")
    parser.add_argument("--rescore-lm", metavar="FILE",
                        help="the second pass's LM, which re-ranks each final's n-best: a neural word LM "
                             "(.safetensors: recipes/lm/neural.py) or an n-gram (ARPA or KenLM binary) (default: the "
                             "one bundled beside the bundled LM, with that LM only; a model folder's own, with its "
                             "own LM)")
    parser.add_argument("--rescore-weight", type=finite_float, default=second.weight,
                        help=f"the second LM's weight in the second pass (default {second.weight:g})")
    parser.add_argument("--rescore-first-weight", type=finite_float, default=second.first_weight,
                        help=f"the first-pass LM's weight in the second pass (default {second.first_weight:g})")
    parser.add_argument("--rescore-word-score", type=finite_float, default=second.word_score,
                        help=f"score per word in the second pass (default {second.word_score:g})")
    parser.add_argument("--nbest", type=positive_int, default=second.nbest,
                        help=f"final hypotheses the second pass ranks again (default {second.nbest})")
    parser.add_argument("--hotwords", metavar="FILE",
                        help="words and phrases to favour, one a line with an optional boost after it "
                             f"(e.g. 'jessica pemberton 12'; default boost {DEFAULT_BOOST:g}); words outside the "
                             "lexicon become possible outputs (needs the beam search)")
    parser.add_argument("--hotword-min-confidence", type=_unit_interval, default=0.0, metavar="C",
                        help="a final in which a listed hotword's confidence is below C (0-1) is decoded again "
                             "without the list (default 0: off)")
    parser.add_argument("--plain", action="store_true",
                        help="finals as plain upper-case words: no casing or punctuation restoration")
    parser.add_argument("--spoken-form", action="store_true",
                        help="finals with numbers as the words said (\"twenty five dollars\"), not written "
                             "(\"$25\", the default where the restorer runs)")
    parser.add_argument("--restorer", metavar="FILE",
                        help="casing and punctuation restorer (.onnx, or .safetensors with torch) instead of the "
                             "bundled one (python -m asr.training.restorer makes one)")


def add_endpoint_args(parser: argparse.ArgumentParser) -> None:
    """The endpoint rules (asr.decoding.endpoint_rules) as flags."""
    defaults = EndpointConfig()
    parser.add_argument("--sentence-end-silence", type=positive_float, default=None,
                        help="let the word LM judge where a sentence ends: seconds of silence after speech that end a "
                             "segment where it says the sentence can end (with either of these two flags; default "
                             f"{defaults.sentence_end_silence:g})")
    parser.add_argument("--mid-phrase-silence", type=positive_float, default=None,
                        help="... and where it says the sentence goes on (default "
                             f"{defaults.mid_phrase_silence:g}; {defaults.no_lm_silence:g} without a word LM)")
    parser.add_argument("--trailing-silence", type=positive_float, default=None,
                        help="one fixed silence (seconds) that ends a segment whatever was said (the default rule, "
                             f"{defaults.trailing_silence:g})")
    parser.add_argument("--min-segment", type=non_negative_float, default=defaults.min_segment,
                        help="seconds: a shorter segment does not end on silence (default 0)")
    parser.add_argument("--max-segment", type=positive_float, default=defaults.max_segment,
                        help=f"seconds: a segment this long ends wherever it is (default {defaults.max_segment:g})")
    sentence_rules = EndpointConfig.by_sentence()  # the defaults where the word LM judges the pauses
    parser.add_argument("--words-before", type=non_negative_int, default=None,
                        help="words of the finals before a segment that the word LMs read it after (default "
                             f"{defaults.words_before}: none; {sentence_rules.words_before} where the word LM judges "
                             "the pauses)")
    parser.add_argument("--mid-sentence", type=_unit_interval, default=None,
                        help="how likely a pause that ends a segment is inside a sentence against at its end: the "
                             "word LMs weigh the sentence's end by it (0: every segment ends a sentence; 1: the pause "
                             f"tells nothing; default {defaults.mid_sentence:g}, {sentence_rules.mid_sentence:g} where "
                             "the word LM judges the pauses)")


def endpoint_config(args: argparse.Namespace) -> EndpointConfig:
    """The endpoint rules of the options (the defaults for a tool without them); none with --whole (asr.evaluate:
    each input one segment, `EndpointConfig.whole`)."""
    if getattr(args, "whole", False):
        return EndpointConfig.whole()
    judged = ("sentence_end_silence", "mid_phrase_silence")
    defaults = EndpointConfig()
    if getattr(args, "trailing_silence", None) is not None:
        defaults = EndpointConfig.fixed(args.trailing_silence)
    elif any(getattr(args, name, None) is not None for name in judged):  # the word LM judges
        defaults = EndpointConfig.by_sentence()
    names = (*judged, "min_segment", "max_segment", "words_before", "mid_sentence")
    return replace(defaults, **{name: getattr(args, name) for name in names if getattr(args, name, None) is not None})


def load_recognizer(args: argparse.Namespace) -> Recognizer:
    """The acoustic model the options name (raises ModelError, or ValueError, with a one-line reason)."""
    checks.model(args)  # what the tools checked before loading anything, for callers that did not
    int8 = getattr(args, "int8", False)
    backend = "onnx" if args.onnx_dir else args.backend  # None: default_backend(the model)
    recognizer = api.load_recognizer(args.onnx_dir or args.model, backend, args.threads, int8,
                                     getattr(args, "device", None))
    if getattr(args, "chunk_ms", None):  # a lookahead model's chunk bounds how often text can come
        recognizer.check_chunk_ms(args.chunk_ms)
    return recognizer


def load_decoder(args: argparse.Namespace, recognizer: Recognizer) -> Decoder:
    """The decoder the options ask for (`asr.api.load_decoder`), favouring --hotwords if given, restoring the
    casing and punctuation of finals unless --plain (raises LMError, or HotwordError, RestorerError and other
    ValueErrors, with a one-line reason)."""
    checks.decoding(args)  # as the tools checked before loading anything, for callers that did not
    hotwords, bundled, own_lm = getattr(args, "hotwords", None), _bundled(args), folder_lm(args.model)
    cfg = BeamConfig(args.beam_size, args.lm_weight, args.word_score,
                     getattr(args, "lexicon_words", BeamConfig().lexicon_words), args.beam_threshold,
                     getattr(args, "token_beam", BeamConfig().token_beam))
    return api.load_decoder(recognizer, bundled, args.greedy, args.beam, args.lm, cfg, hotwords,
                            restore=not getattr(args, "plain", True), restorer=getattr(args, "restorer", None),
                            hotword_min_confidence=getattr(args, "hotword_min_confidence", 0.0),
                            written=not getattr(args, "spoken_form", False), own_lm=own_lm,
                            rescore=rescore_config(args), model=args.model)


def rescore_config(args: argparse.Namespace) -> RescoreConfig:
    """The second pass the options ask for (`asr.decoding.rescore`): none with --no-rescore, --rescore-lm's LM, else
    the bundled one where the first pass searches with the bundled LM (a model folder's own beside its own LM)."""
    defaults = RescoreConfig()
    if getattr(args, "no_rescore", False):
        return RescoreConfig(lm=None)
    return RescoreConfig(getattr(args, "rescore_lm", None) or defaults.lm,
                         getattr(args, "rescore_weight", defaults.weight),
                         getattr(args, "rescore_first_weight", defaults.first_weight),
                         getattr(args, "rescore_word_score", defaults.word_score),
                         getattr(args, "nbest", defaults.nbest))


def _bundled(args: argparse.Namespace) -> bool:
    """Whether the options name the bundled model (or its shipped export), which decodes with the word LM."""
    return args.model is None and api.is_bundled(args.onnx_dir)


def load_transcriber(args: argparse.Namespace) -> api.Transcriber:
    """The model, decoder and endpointing the options ask for (errors as in load_recognizer, load_decoder)."""
    recognizer = load_recognizer(args)
    return api.Transcriber(recognizer, load_decoder(args, recognizer), endpoint_config(args).validate())


def quiet_when_piped_output_closes(main: Callable[..., int]) -> Callable[..., int]:
    """A tool's `main` that ends quietly (exit status 0) when its output's reader goes away, as in
    `python -m asr.stream --json | head -1`, instead of a BrokenPipeError traceback."""
    @functools.wraps(main)
    def run(*args, **kwargs) -> int:
        try:
            return main(*args, **kwargs)
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
            return 0
    return run


def make_output_dir(path: Path) -> None:
    """Create --output-dir (and the folders above it); ValueError naming what is in the way."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ValueError(f"--output-dir {path}: is a file, not a folder") from None
    except NotADirectoryError:
        above = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        raise ValueError(f"--output-dir {path}: {above or 'a folder above it'} is a file, not a folder") from None
    except OSError as err:
        raise ValueError(f"--output-dir {path}: cannot create it ({err.strerror or err})") from None


def error(tool: str, message: object) -> None:
    """One error line on stderr, prefixed with the tool's name."""
    print(f"asr.{tool}: error: {message}", file=sys.stderr)
