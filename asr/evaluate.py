"""Word and character error rates of a model on a manifest.

    python -m asr.evaluate --manifest M.jsonl [--model PATH] [--streaming --chunk-ms 500]
                           [--split NAME] [--report PATH] [--limit N] [--beam | --lm LM.arpa] [--by-speaker]

References and hypotheses both go through asr.text.normalize before jiwer scores them.
Offline mode runs the recognizer's whole-utterance forward; --streaming feeds it in chunks
and also reports the per-chunk compute latency. Both give the same transcripts (the streaming
path equals the offline forward). The last line is exactly
`WER=<pct> CER=<pct> RTF=<float> utts=<n>`.
Decoding is greedy CTC; --beam uses a lexicon beam search with the bundled word LM, --lm with another
one (python -m asr.tools.lm). --by-speaker also prints one line per manifest speaker, worst WER first.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import jiwer
import numpy as np
import torch

from asr import cli
from asr.audio import SAMPLE_RATE, AudioError, load_audio, rechunk
from asr.decoding.beam import BeamSearch
from asr.decoding.ctc import greedy_decode
from asr.manifest import ManifestError, Utterance, read_manifest
from asr.model.loader import ModelError
from asr.recognizer import Recognizer
from asr.text import normalize


@dataclass
class Score:
    """Edit counts of one hypothesis against its reference (words or characters)."""

    ref: int = 0  # reference length
    sub: int = 0
    dels: int = 0
    ins: int = 0

    @property
    def errors(self) -> int:
        return self.sub + self.dels + self.ins

    def add(self, other: "Score") -> None:
        self.ref, self.sub = self.ref + other.ref, self.sub + other.sub
        self.dels, self.ins = self.dels + other.dels, self.ins + other.ins

    @staticmethod
    def total(scores: Iterable["Score"]) -> "Score":
        """The sum of `scores` (a new Score)."""
        summed = Score()
        for other in scores:
            summed.add(other)
        return summed

    def rate(self) -> float:
        """Errors / reference length (0 for an empty reference with no errors)."""
        return self.errors / self.ref if self.ref else float(self.errors > 0)


@dataclass
class UttResult:
    audio: str
    ref: str
    hyp: str
    duration: float
    compute_s: float
    words: Score
    chars: Score
    alignment: list[dict] = field(default_factory=list)
    speaker: str = ""


def score(ref: str, hyp: str) -> tuple[Score, Score, list[dict]]:
    """Word and character scores of normalised `hyp` against normalised `ref`, and the word alignment."""
    if not ref:  # jiwer needs a reference; everything said is an insertion
        ins = [{"op": "insert", "ref": "", "hyp": hyp}] if hyp else []
        return Score(0, 0, 0, len(hyp.split())), Score(0, 0, 0, len(hyp)), ins
    w = jiwer.process_words(ref, hyp)
    c = jiwer.process_characters(ref, hyp)
    ref_words, hyp_words = w.references[0], w.hypotheses[0]
    alignment = [{"op": chunk.type, "ref": " ".join(ref_words[chunk.ref_start_idx:chunk.ref_end_idx]),
                  "hyp": " ".join(hyp_words[chunk.hyp_start_idx:chunk.hyp_end_idx])} for chunk in w.alignments[0]]
    return (Score(len(ref_words), w.substitutions, w.deletions, w.insertions),
            Score(len(ref), c.substitutions, c.deletions, c.insertions), alignment)


def recognize(recognizer: Recognizer, wave, chunk_samples: int | None,
              beam: BeamSearch | None = None) -> tuple[str, list[float]]:
    """Text of one waveform: whole-utterance forward (chunk_samples None) or streamed in chunks,
    decoded greedily or with `beam`. Also returns the compute time of each chunk in ms (streaming only)."""
    if chunk_samples is None:
        logprobs = recognizer.offline_logprobs(wave)
        return (beam(logprobs) if beam else recognizer.tokenizer.decode(greedy_decode(logprobs))), []
    latencies, outputs = [], []
    for step in recognizer.stream(rechunk([wave], chunk_samples)):
        latencies += [] if step.tail else [step.compute_ms]
        outputs += [step.logprobs] if beam else []
    return (beam(torch.cat(outputs)) if beam else recognizer.text(step.state)), latencies


def evaluate(recognizer: Recognizer, utterances: list[Utterance], chunk_samples: int | None,
             beam: BeamSearch | None = None) -> tuple[list[UttResult], list[float], list[str]]:
    """Recognise and score each utterance: (results, chunk latencies in ms, error lines)."""
    results, latencies, errors = [], [], []
    for utt in utterances:
        try:
            wave = load_audio(utt.audio)
        except AudioError as err:
            errors.append(str(err))
            continue
        began = time.perf_counter()
        hyp, chunk_ms = recognize(recognizer, wave, chunk_samples, beam)
        compute = time.perf_counter() - began
        latencies.extend(chunk_ms)
        ref, hyp = normalize(utt.text), normalize(hyp)
        words, chars, alignment = score(ref, hyp)
        results.append(UttResult(str(utt.audio), ref, hyp, wave.numel() / SAMPLE_RATE, compute, words, chars,
                                 alignment, utt.speaker))
    return results, latencies, errors


def totals(results: list[UttResult]) -> tuple[Score, Score]:
    """Summed word and character scores of `results`."""
    return Score.total(r.words for r in results), Score.total(r.chars for r in results)


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


def by_speaker(results: list[UttResult]) -> list[tuple[str, int, Score, Score]]:
    """(speaker, utterances, word score, character score) per speaker, highest WER first."""
    groups: dict[str, list[UttResult]] = {}
    for r in results:
        groups.setdefault(r.speaker, []).append(r)
    rows = [(speaker, len(group), *totals(group)) for speaker, group in groups.items()]
    return sorted(rows, key=lambda row: (-row[2].rate(), row[0]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m asr.evaluate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_manifest_args(parser)
    parser.add_argument("--streaming", action="store_true", help="feed the audio in chunks of --chunk-ms")
    cli.add_chunk_ms(parser, 500.0, "streaming chunk in ms (default 500)")
    parser.add_argument("--report", type=Path, help="write a per-utterance JSON report with alignments here")
    parser.add_argument("--by-speaker", action="store_true",
                        help="also print WER and CER per manifest speaker, worst first")
    cli.add_lm_args(parser)
    args = parser.parse_args(argv)
    try:
        utterances = read_manifest(args.manifest, args.split)[: args.limit]
        recognizer = cli.load_recognizer("evaluate", args.model)
        beam = cli.load_beam(args, recognizer)
    except (ManifestError, ModelError, FileNotFoundError) as err:
        print(f"asr.evaluate: error: {err}", file=sys.stderr)
        return 1
    chunk_samples = cli.chunk_samples(args.chunk_ms) if args.streaming else None
    results, latencies, errors = evaluate(recognizer, utterances, chunk_samples, beam)
    for error in errors:
        print(f"asr.evaluate: error: {error}", file=sys.stderr)
    if not results:
        print(f"asr.evaluate: error: {args.manifest}: no utterance could be evaluated", file=sys.stderr)
        return 1
    summary = summarize(results, latencies)
    if args.report:
        report = {"manifest": str(args.manifest), "mode": "streaming" if args.streaming else "offline",
                  "decoder": "beam" if beam else "greedy", "lm": args.lm,
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
    if errors:
        print(f"failed={len(errors)} (see the errors above)")
    print(f"WER={summary['wer'] * 100:.2f} CER={summary['cer'] * 100:.2f} RTF={summary['rtf']:.4f} "
          f"utts={summary['utts']}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
