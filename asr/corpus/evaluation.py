"""A model scored on a manifest: each utterance transcribed as `asr.transcribe` transcribes it, through the same
`asr.batch.files.transcribed` (length-sorted padded batches, --jobs processes, or one file at a time: the endpointer's
segments, their finals restored and written as the options ask), or streamed as `asr.stream` streams it
(`streaming`: chunk by chunk through `Transcriber.stream`, each chunk timed); that text normalised and scored
against the normalised reference. And the restorer on its text. `python -m asr.evaluate` prints what this computes.
Whole-utterance decoding (no endpoint cuts) is the same path with `EndpointConfig.whole` (asr.evaluate --whole)."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from asr.api import Transcriber, chunk_samples
from asr.audio import SAMPLE_RATE, AudioError
from asr.audio.chunks import rechunk
from asr.audio.files import load_audio
from asr.batch.files import transcribed
from asr.batch.padded import DEFAULT_BATCH_SECONDS
from asr.corpus.manifest import Utterance
from asr.corpus.scoring import UttResult, score, totals
from asr.decoding.decoder import Decoder
from asr.text.normalize import normalize
from asr.text.restore.labels import labelled
from asr.text.restore.metrics import format_summary, score_baseline, score_restorer


def options(batch_seconds: float = DEFAULT_BATCH_SECONDS, chunk_ms: float = 2000.0) -> argparse.Namespace:
    """The options `evaluate` reads, for a caller without a command line (`asr.finetune`'s scoring): asr.transcribe's
    defaults, one process."""
    return argparse.Namespace(batch_seconds=batch_seconds, chunk_ms=chunk_ms, jobs=1)


def streamed(model: Transcriber, wave: np.ndarray, chunk_ms: float) -> tuple[str, list[float]]:
    """The text `asr.stream` gives for 16 kHz `wave` fed in chunks of `chunk_ms` (its finals, joined as a
    Transcript's), and each whole chunk's wall time in ms (model step, endpointing, decoding and its partial)."""
    stream, finals, latencies = model.stream(sample_rate=SAMPLE_RATE, chunk_ms=chunk_ms), [], []
    size = chunk_samples(chunk_ms)
    for chunk in rechunk([wave], size):
        began = time.perf_counter()
        finals += [e for e in stream.push(chunk) if e.is_final]
        if chunk.size == size:  # a shorter last chunk waits for `finish`
            latencies.append((time.perf_counter() - began) * 1000)
    finals += [e for e in stream.finish() if e.is_final]
    return " ".join(e.text for e in finals), latencies


def _scored(utt: Utterance, text: str, seconds: float, compute: float) -> UttResult:
    """One utterance's text scored against its reference (both normalised)."""
    ref, hyp = normalize(utt.text), normalize(text)
    words, chars, alignment = score(ref, hyp)
    return UttResult(str(utt.audio), ref, hyp, seconds, compute, words, chars, alignment, utt.speaker)


def evaluate(model: Transcriber, utterances: list[Utterance], args: argparse.Namespace | None = None,
             streaming: bool = False) -> tuple[list[UttResult], list[float], list[str]]:
    """Transcribe and score each utterance: (results, chunk latencies in ms, error lines). `args`: asr.transcribe's
    --batch-seconds, --jobs and --chunk-ms (and for spawned --jobs workers, the options they load the model from;
    default `options()`). Not `streaming`: asr.transcribe's text (`asr.batch.files.transcribed`), each result's
    compute time its share, by duration, of the run's wall time. `streaming`: asr.stream's, in --chunk-ms chunks."""
    args = args or options()
    if streaming and getattr(args, "jobs", 1) > 1:
        raise ValueError("--jobs runs the offline mode's batches: not with --streaming")
    results, latencies, errors = [], [], []
    if streaming:
        for utt in utterances:
            try:
                wave = load_audio(utt.audio)
            except AudioError as err:
                errors.append(str(err))
                continue
            began = time.perf_counter()
            text, chunk_ms = streamed(model, wave, args.chunk_ms)
            latencies.extend(chunk_ms)
            results.append(_scored(utt, text, wave.size / SAMPLE_RATE, time.perf_counter() - began))
        return results, latencies, errors
    began, heard = time.perf_counter(), []
    outcomes = transcribed(model, [u.audio for u in utterances], args, lambda _: None, [u.duration for u in utterances])
    try:
        for utt, (_, outcome) in zip(utterances, outcomes):
            if isinstance(outcome, AudioError):
                errors.append(str(outcome))
            else:
                heard.append((utt, outcome))
    finally:
        outcomes.close()  # at Ctrl-C too: the --jobs pool is stopped here
    share = (time.perf_counter() - began) / max(sum(t.duration for _, t in heard), 1e-9)
    return [_scored(utt, t.text, t.duration, t.duration * share) for utt, t in heard], [], errors


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
