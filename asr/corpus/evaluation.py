"""A model scored on a manifest: each utterance recognised (whole, streamed in chunks, or in padded batches with
the others, in --jobs processes if asked) and its hypothesis scored against its reference, both normalised; and the
restorer on its text. `python -m asr.evaluate` prints what this computes."""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from asr.api import Transcriber
from asr.audio import SAMPLE_RATE, AudioError
from asr.audio.chunks import rechunk
from asr.audio.files import load_audio
from asr.batch.padded import DEFAULT_BATCH_SECONDS, WINDOW_SECONDS, LogprobSink, in_order, run_batched
from asr.batch.processes import in_processes
from asr.corpus.manifest import Utterance
from asr.corpus.scoring import UttResult, score, totals
from asr.decoding.decoder import Decoder
from asr.model.recognizer import Recognizer
from asr.text.normalize import normalize
from asr.text.restore.labels import labelled
from asr.text.restore.metrics import format_summary, score_baseline, score_restorer


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
    batches (`asr.batch.padded.run_batched`); the arguments as `asr.batch.padded.transcribe_batched`'s, so that a
    --jobs worker runs it (`asr.batch.processes.in_processes`)."""
    vocab = model.recognizer.model.cfg.vocab_size
    return in_order(run_batched(model.recognizer, sources, lambda _: TextSink(model.decoder, vocab), batch_seconds,
                                window_seconds, progress, decode_thread, seconds), sources)


def evaluate_batched(recognizer: Recognizer, utterances: list[Utterance], decoder: Decoder, batch_seconds: float,
                     jobs: int = 1, args: argparse.Namespace | None = None) -> tuple[list[UttResult], list[str]]:
    """The offline mode's text, the utterances stepped in length-sorted padded batches (`texts_batched`), in
    `jobs` processes when there are several (`asr.batch.processes.in_processes`, with the options `args` for workers
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
