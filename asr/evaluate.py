"""Word and character error rates of a model on a manifest.

    python -m asr.evaluate --manifest M.jsonl [--model PATH] [--streaming --chunk-ms 500] [--jobs N]
                           [--split NAME] [--report PATH] [--limit N] [--greedy | --lm LM.arpa] [--by-speaker]

References and hypotheses both go through asr.text.normalize before jiwer scores them.
Offline mode computes the utterances' log-probs in length-sorted padded batches (--batch-seconds S of audio a
step, asr.batch; --jobs N: those batches in N processes, asr.parallel, the same scores; 0: each utterance's
whole-utterance forward alone); --streaming feeds each in chunks
and also reports the per-chunk compute latency (model and decoder). Both give the same
transcripts (the streaming path equals the offline forward). The last line is exactly
`WER=<pct> CER=<pct> RTF=<float> utts=<n>`.
Decoding is the same as asr.stream's and asr.transcribe's: the beam search with the bundled word LM for
the bundled model, --greedy for greedy CTC, --lm for another LM (python -m asr.tools.lm).
--by-speaker also prints one line per manifest speaker, worst WER first.
--restorer-text FILE (cased, punctuated sentences, one a line: the restorer's held-out split,
data/restorer/held.txt from recipes/restorer/prepare.py) also scores the casing and punctuation
restorer on it: F1 per mark and casing accuracy, beside the trivial baseline (capitalise the first
word, end with a period). WER itself is always scored on normalised words. Without --manifest only
the restorer is scored.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from asr import cli, interrupt
from asr.audio import SAMPLE_RATE, AudioError, load_audio, rechunk
from asr.api import Transcriber
from asr.batch import DEFAULT_BATCH_SECONDS, WINDOW_SECONDS, LogprobSink, in_order, run_batched
from asr.decoding.beam import LMError
from asr.decoding.decoder import Decoder
from asr.manifest import ManifestError, Utterance, read_manifest
from asr.model.backend import ModelError
from asr.parallel import StartError, in_processes
from asr.recognizer import Recognizer
from asr.restore.labels import labelled
from asr.restore.metrics import format_summary, score_baseline, score_restorer
from asr.scoring import UttResult, by_speaker, score, totals
from asr.text import normalize


def recognize(recognizer: Recognizer, wave: np.ndarray, chunk_samples: int | None,
              decoder: Decoder) -> tuple[str, list[float]]:
    """Text of one waveform: whole-utterance forward (chunk_samples None) or streamed in chunks, then
    the decoder's search over all of it. Also returns each chunk's compute time in ms (streaming only)."""
    if chunk_samples is None:
        return decoder.text(decoder.decode(recognizer.offline_logprobs(wave))), []
    latencies, search = [], decoder.search()
    for step in recognizer.stream(rechunk([wave], chunk_samples)):
        began = time.perf_counter()
        search.push(step.logprobs)
        if not step.tail:
            latencies.append(step.compute_ms + (time.perf_counter() - began) * 1000)
    return decoder.text(search.final()), latencies


class TextSink:
    """A file's log-probs gathered, then decoded as one utterance -> (its text, seconds of audio): the offline
    mode's text (the whole utterance's search, no endpointing), decoded where `run_batched` runs its sinks."""

    def __init__(self, decoder: Decoder, vocab: int):
        self.decoder, self.logprobs = decoder, LogprobSink(vocab)

    def push(self, logprobs: np.ndarray, now: float) -> None:
        self.logprobs.push(logprobs, now)

    def finish(self, now: float) -> tuple[str, float]:
        logprobs, seconds = self.logprobs.finish(now)
        return self.decoder.text(self.decoder.decode(logprobs)), seconds


def texts_batched(model: Transcriber, sources: list[Path], batch_seconds: float = DEFAULT_BATCH_SECONDS,
                  progress: Callable[[float], None] | None = None, window_seconds: float = WINDOW_SECONDS,
                  seconds: list[float | None] | None = None, decode_thread: bool = True
                  ) -> Iterator[tuple[Path, tuple[str, float] | AudioError]]:
    """Files -> (file, (its offline text, its seconds) or AudioError) in order, stepped in length-sorted padded
    batches (`asr.batch.run_batched`); the arguments as `asr.batch.transcribe_batched`'s, so that a --jobs worker
    runs it (`asr.parallel.in_processes`)."""
    vocab = model.recognizer.model.cfg.vocab_size
    return in_order(run_batched(model.recognizer, sources, lambda _: TextSink(model.decoder, vocab), batch_seconds,
                                window_seconds, progress, decode_thread, seconds), sources)


def evaluate_batched(recognizer: Recognizer, utterances: list[Utterance], decoder: Decoder, batch_seconds: float,
                     jobs: int = 1, args: argparse.Namespace | None = None) -> tuple[list[UttResult], list[str]]:
    """The offline mode's text, the utterances stepped in length-sorted padded batches (`texts_batched`), in
    `jobs` processes when there are several (`asr.parallel.in_processes`, with the options `args` for workers
    that load their own model): (results, error lines). Each result's compute time is its share, by duration,
    of the whole run's wall time."""
    began, heard, errors = time.perf_counter(), [], []
    model, sources = Transcriber(recognizer, decoder), [u.audio for u in utterances]
    known = [u.duration for u in utterances]
    if jobs > 1:
        outcomes = in_processes(model, args, sources, jobs, texts_batched, seconds=known)
    else:
        outcomes = texts_batched(model, sources, batch_seconds, seconds=known)
    for utt, (_, outcome) in zip(utterances, outcomes):
        if isinstance(outcome, AudioError):
            errors.append(str(outcome))
            continue
        hyp, seconds = outcome
        heard.append((utt, hyp, seconds))
    share = (time.perf_counter() - began) / max(sum(seconds for _, _, seconds in heard), 1e-9)
    return [_scored(utt, hyp, seconds, seconds * share) for utt, hyp, seconds in heard], errors


def _scored(utt: Utterance, hyp: str, seconds: float, compute: float) -> UttResult:
    """One utterance's hypothesis scored against its reference (both normalised)."""
    ref, hyp = normalize(utt.text), normalize(hyp)
    words, chars, alignment = score(ref, hyp)
    return UttResult(str(utt.audio), ref, hyp, seconds, compute, words, chars, alignment, utt.speaker)


def evaluate(recognizer: Recognizer, utterances: list[Utterance], chunk_samples: int | None,
             decoder: Decoder, batch_seconds: float = 0.0, jobs: int = 1, args: argparse.Namespace | None = None
             ) -> tuple[list[UttResult], list[float], list[str]]:
    """Recognise and score each utterance: (results, chunk latencies in ms, error lines). Offline
    (`chunk_samples` None) with `batch_seconds` > 0: in padded batches (`evaluate_batched`; in `jobs` processes
    if more than one, `args` the options they load the model from), the same text."""
    if chunk_samples is None and batch_seconds > 0:
        results, errors = evaluate_batched(recognizer, utterances, decoder, batch_seconds, jobs, args)
        return results, [], errors
    if jobs > 1:
        raise ValueError("--jobs runs the offline mode's batches: not with --streaming or --batch-seconds 0")
    results, latencies, errors = [], [], []
    for utt in utterances:
        try:
            wave = load_audio(utt.audio)
        except AudioError as err:
            errors.append(str(err))
            continue
        began = time.perf_counter()
        hyp, chunk_ms = recognize(recognizer, wave, chunk_samples, decoder)
        compute = time.perf_counter() - began
        latencies.extend(chunk_ms)
        results.append(_scored(utt, hyp, wave.size / SAMPLE_RATE, compute))
    return results, latencies, errors


def summarize(results: list[UttResult], latencies: list[float]) -> dict:
    words, chars = totals(results)
    audio = sum(r.duration for r in results)
    summary = {"utts": len(results), "wer": words.rate(), "cer": chars.rate(),
               "rtf": sum(r.compute_s for r in results) / audio if audio else 0.0,
               "ref_words": words.ref, "substitutions": words.sub, "deletions": words.dels,
               "insertions": words.ins, "audio_seconds": audio}
    if latencies:
        summary["chunk_ms_median"] = float(np.median(latencies))
        summary["chunk_ms_p95"] = float(np.percentile(latencies, 95))
    return summary


def restorer_lines(decoder: Decoder, path: Path) -> list[str]:
    """The restorer's scores on the sentences of `path`, then the baseline's (one line each)."""
    if decoder.restorer is None:
        raise ValueError("--restorer-text: no restorer (--plain was given, or none is bundled in this installation)")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: cannot read the restorer's text ({getattr(err, 'strerror', None) or err})") from None
    sentences = [item for line in lines if (item := labelled(line)) is not None]
    if not sentences:
        raise ValueError(f"{path}: no cased, punctuated sentence to score the restorer on")
    return [format_summary("restorer", score_restorer(sentences, decoder.restorer.labels).summary()),
            format_summary("baseline", score_baseline(sentences).summary())]


@cli.quiet_when_piped_output_closes
@interrupt.handled("evaluate")
def main(argv: list[str] | None = None) -> int:
    parser = cli.new_parser("asr.evaluate", __doc__)
    cli.add_manifest_args(parser, required=False)
    parser.add_argument("--streaming", action="store_true", help="feed the audio in chunks of --chunk-ms")
    cli.add_chunk_ms(parser, 500.0, "streaming chunk in ms (default 500)")
    cli.add_batch_seconds(parser)
    cli.add_jobs(parser)
    parser.add_argument("--report", type=Path, help="write a per-utterance JSON report with alignments here")
    parser.add_argument("--by-speaker", action="store_true",
                        help="also print WER and CER per manifest speaker, worst first")
    parser.add_argument("--restorer-text", type=Path, metavar="FILE",
                        help="also score the casing and punctuation restorer on these sentences (one a line)")
    cli.add_decoder_args(parser)
    args = parser.parse_args(argv)
    if args.manifest is None and args.restorer_text is None:
        parser.error("the following arguments are required: --manifest (or --restorer-text)")
    if args.jobs > 1 and (args.streaming or args.batch_seconds == 0):
        parser.error("--jobs runs the offline mode's batches: not with --streaming or --batch-seconds 0")
    try:
        utterances = read_manifest(args.manifest, args.split)[: args.limit] if args.manifest else []
        recognizer = cli.load_recognizer(args)
        decoder = cli.load_decoder(args, recognizer)
        restorer = restorer_lines(decoder, args.restorer_text) if args.restorer_text else []
    except (ManifestError, ModelError, LMError, ValueError, OSError) as err:
        cli.error("evaluate", err)
        return 1
    if args.manifest is None:
        print("\n".join(restorer))
        return 0
    chunk_samples = cli.chunk_samples(args.chunk_ms) if args.streaming else None
    try:
        results, latencies, errors = evaluate(recognizer, utterances, chunk_samples, decoder, args.batch_seconds,
                                              args.jobs, args)
    except StartError as err:  # a spawned --jobs worker could not load what the options ask for
        cli.error("evaluate", err)
        return 1
    for error in errors:
        cli.error("evaluate", error)
    if not results:
        cli.error("evaluate", f"{args.manifest}: no utterance could be evaluated")
        return 1
    summary = summarize(results, latencies)
    if args.report:
        report = {"manifest": str(args.manifest), "mode": "streaming" if args.streaming else "offline",
                  "decoder": decoder.kind, "lm": str(decoder.lm.path) if decoder.lm else None,
                  "chunk_ms": args.chunk_ms if args.streaming else None, "summary": summary,
                  "failed": errors, "utterances": [asdict(r) for r in results]}
        args.report.write_text(json.dumps(report, indent=1) + "\n")
    if args.by_speaker:
        for speaker, count, words, chars in by_speaker(results):
            print(f"speaker={speaker or '-'} WER={words.rate() * 100:.2f} CER={chars.rate() * 100:.2f} "
                  f"utts={count} words={words.ref}")
    print(f"substitutions={summary['substitutions']} deletions={summary['deletions']} "
          f"insertions={summary['insertions']} ref_words={summary['ref_words']}")
    if latencies:
        print(f"chunk_ms={args.chunk_ms:g} latency_median_ms={summary['chunk_ms_median']:.1f} "
              f"latency_p95_ms={summary['chunk_ms_p95']:.1f}")
    for line in restorer:
        print(line)
    if errors:
        print(f"failed={len(errors)} (see the errors above)")
    print(f"WER={summary['wer'] * 100:.2f} CER={summary['cer'] * 100:.2f} RTF={summary['rtf']:.4f} "
          f"utts={summary['utts']}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
