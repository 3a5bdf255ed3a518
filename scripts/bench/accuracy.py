"""Our model scored on a set as `asr.evaluate` scores it: the benchmark's accuracy rows.

Every row is `asr.evaluate` with a few flags, run through the same code (`asr.cli` loads the transcriber from the
options, `asr.corpus.evaluation.evaluate` transcribes and scores): the model's own units (a phone model's are
spelled into words by its lexicon search), the endpointer's segments, the second pass, the written form, then
`asr.text.normalize` on both sides. The rows:

    default       asr.evaluate M                 the text asr.transcribe prints (the tools' default decoding)
    first_pass    asr.evaluate M --no-rescore    the first pass alone (where the default has a second pass)
    no_lm         asr.evaluate M --greedy        no word LM (a phone model: its lexicon searched without an LM)
    streaming     asr.evaluate M --streaming     asr.stream's text in 500 ms chunks, each chunk timed

A row that would decode exactly as the default does (a model of your own decodes greedily: no second pass, no LM
to leave out) is not run.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from asr import cli
from asr.api import Transcriber
from asr.cli import checks
from asr.corpus.evaluation import evaluate, summarize
from asr.corpus.manifest import read_manifest
from asr.corpus.scoring import UttResult
from asr.decoding.decoder import Decoder
from asr.model.recognizer import Recognizer

from bench.data import EvalSet


@dataclass(frozen=True)
class Row:
    key: str
    flags: tuple[str, ...]  # asr.evaluate's flags for it, besides the model's
    what: str  # how RESULTS.md names the decoding


ROWS = (Row("default", (), "the tools' default"),
        Row("first_pass", ("--no-rescore",), "first pass alone (`--no-rescore`)"),
        Row("no_lm", ("--greedy",), "no word LM (`--greedy`)"),
        Row("streaming", ("--streaming",), "the default, streamed in 500 ms chunks (`--streaming`)"))


def options(flags: list[str]) -> argparse.Namespace:
    """asr.evaluate's options for `flags`: its parser's arguments, from the same `asr.cli` pieces (and so the same
    defaults), checked as it checks them (ValueError with a one-line reason)."""
    parser = argparse.ArgumentParser(prog="asr.evaluate")
    cli.add_manifest_args(parser, required=False)
    parser.add_argument("--streaming", action="store_true")
    parser.add_argument("--whole", action="store_true")
    cli.add_chunk_ms(parser, 500.0, "streaming chunk in ms")
    cli.add_batch_seconds(parser)
    cli.add_jobs(parser)
    cli.add_decoder_args(parser)
    cli.add_endpoint_args(parser)
    args = parser.parse_args(flags)
    checks.options(args)
    return args


def decoding(decoder: Decoder) -> str:
    """The decoding a decoder does, in words: its search, its LM, its second pass."""
    search = {"greedy": "greedy CTC", "lexicon": "lexicon search, no word LM",
              "beam": "lexicon search + word LM" if decoder.tokenizer.kind == "phone" else "beam search + word LM"}
    return search[decoder.kind] + (" + second pass" if decoder.rescorer is not None else "")


@dataclass
class Scored:
    """One row on one set: asr.evaluate's summary, its per-utterance results and (streaming) chunk times."""

    summary: dict
    results: list[UttResult]
    chunk_ms: list[float]
    errors: list[str]


class Rows:
    """The rows' transcribers over one recognizer (loaded once, as `model_flags` name it), each loaded on first use;
    `lm_flags` (--lm FILE) go to every row but the one without a word LM."""

    def __init__(self, model_flags: list[str], lm_flags: list[str] | None = None):
        self.model_flags, self.lm_flags = model_flags, lm_flags or []
        self.recognizer: Recognizer = cli.load_recognizer(options(model_flags))
        self._loaded: dict[str, tuple[Transcriber, argparse.Namespace]] = {}

    def transcriber(self, row: Row) -> tuple[Transcriber, argparse.Namespace]:
        """The row's transcriber and options (`cli.load_transcriber`'s, on the shared recognizer)."""
        if row.key not in self._loaded:
            args = options([*self.model_flags, *(self.lm_flags if row.key != "no_lm" else []), *row.flags])
            model = Transcriber(self.recognizer, cli.load_decoder(args, self.recognizer),
                                cli.endpoint_config(args).validate())
            self._loaded[row.key] = model, args
        return self._loaded[row.key]

    @property
    def default(self) -> Transcriber:
        return self.transcriber(ROWS[0])[0]

    def wanted(self) -> list[Row]:
        """The rows that decode differently from the default: no first-pass row without a second pass, no no-LM
        row without a word LM."""
        decoder = self.default.decoder
        return [row for row in ROWS if not (row.key == "first_pass" and decoder.rescorer is None)
                and not (row.key == "no_lm" and decoder.kind != "beam")]

    def score(self, row: Row, eval_set: EvalSet, limit: int | None) -> Scored:
        """The row on the first `limit` utterances of the set, as `asr.evaluate --split S --limit N` scores them."""
        model, args = self.transcriber(row)
        utterances = read_manifest(eval_set.manifest, eval_set.split)[:limit]
        results, latencies, errors = evaluate(model, utterances, args, args.streaming)
        return Scored(summarize(results, latencies), results, latencies, errors)


def by_name(results: list[UttResult], manifest: Path) -> dict[str, UttResult]:
    """Results keyed as `bench.data.Clip` names its utterances: the audio's path relative to the manifest's folder."""
    folder = manifest.parent.resolve()
    keyed = {}
    for result in results:
        path = Path(result.audio).resolve()
        keyed[str(path.relative_to(folder)) if path.is_relative_to(folder) else result.audio] = result
    return keyed
