"""Are the word confidences calibrated? Right against wrong words of the bundled model on speechocean762 dev.

    python scripts/bench/confidence.py [--limit N] [--out benchmarks/confidence]

Each dev utterance goes through `asr.load(...).transcribe` (the tools' streaming path); its words are
aligned to the reference (jiwer, normalised words) and a hypothesis word counts as right where the
alignment matches it, wrong where it substitutes or inserts. Reported for the beam search with the
word LM (the default) and greedy decoding: the AUC of telling right from wrong words by confidence (the
chance that a random right word scores above a random wrong one), the share of wrong words below and
at or above 0.5, and a reliability table. The constants of `asr.decoding.confidence` were chosen on the
first 150 utterances, so the AUC is also given on the others alone. Writes OUT/confidence.md.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jiwer
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import asr  # noqa: E402
from asr.corpus.manifest import read_manifest  # noqa: E402
from asr.text.normalize import normalize  # noqa: E402

DEV = ROOT.parent / "shared" / "data" / "speechocean762" / "dev.jsonl"
CHOSEN_ON = 150  # the first utterances, on which asr.decoding.confidence's constants were chosen
BINS = np.linspace(0.0, 1.0, 11)


def auc(scores: np.ndarray, right: np.ndarray) -> float:
    """P(a random right word scores above a random wrong one), ties counting half (Mann-Whitney)."""
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    start = 0
    for end in range(1, len(scores) + 1):  # average ranks over ties
        if end == len(scores) or sorted_scores[end] != sorted_scores[start]:
            ranks[order[start:end]] = (start + end + 1) / 2
            start = end
    n_right, n_wrong = right.sum(), (~right).sum()
    return float((ranks[right].sum() - n_right * (n_right + 1) / 2) / (n_right * n_wrong))


def scored_words(model: asr.api.Transcriber, utterances: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(confidence, right, utterance index) for every hypothesis word."""
    confidence, right, index = [], [], []
    for i, utt in enumerate(utterances):
        words = model.transcribe(utt.audio).words
        reference = normalize(utt.text)
        if not words or not reference:
            continue
        aligned = jiwer.process_words(reference, " ".join(w.word for w in words)).alignments[0]
        matched = np.zeros(len(words), bool)
        for chunk in aligned:
            if chunk.type == "equal":
                matched[chunk.hyp_start_idx:chunk.hyp_end_idx] = True
        confidence += [w.confidence for w in words]
        right += matched.tolist()
        index += [i] * len(words)
    return np.array(confidence), np.array(right), np.array(index)


def section(name: str, confidence: np.ndarray, right: np.ndarray, index: np.ndarray) -> list[str]:
    low = confidence < 0.5
    later = index >= CHOSEN_ON
    held_out = f"{auc(confidence[later], right[later]):.3f}" if right[later].any() and (~right[later]).any() else "-"
    lines = [f"### {name}", "",
             f"{len(right)} words, {100 * (~right).mean():.1f}% wrong. AUC {auc(confidence, right):.3f} "
             f"(utterances {CHOSEN_ON} on, not used to choose the constants: {held_out}). "
             f"Wrong: {100 * (~right[low]).mean():.1f}% of the {low.sum()} words below 0.5, "
             f"{100 * (~right[~low]).mean():.1f}% of the {(~low).sum()} at or above.", "",
             "| confidence | words | wrong % |", "|---|---:|---:|"]
    for lo, hi in zip(BINS[:-1], BINS[1:]):
        inside = (confidence >= lo) & ((confidence < hi) if hi < 1 else (confidence <= hi))
        share = f"{100 * (~right[inside]).mean():.1f}" if inside.any() else "-"
        lines.append(f"| {lo:.1f}-{hi:.1f} | {inside.sum()} | {share} |")
    return lines + [""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=0, help="only the first N dev utterances (0: all 500)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "confidence")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: bench.quiet, the load guard
    from bench import quiet  # noqa: PLC0415
    args = quiet.parse_guarded(parser, argv, "confidence")  # committed figures: only on a quiet machine
    utterances = read_manifest(DEV)[: args.limit or None]
    began = time.strftime("%Y-%m-%d %H:%M")
    lines = ["# Word confidences on speechocean762 dev", "",
             f"Written by `python scripts/bench/confidence.py` ({began} UTC, {len(utterances)} utterances, the bundled "
             "model on its default backend). A hypothesis word is right where the alignment to the reference "
             "matches it. The constants of `asr/decoding/confidence.py` were chosen on the first "
             f"{CHOSEN_ON} utterances.", ""]
    for name, options in (("beam search with the word LM (the default)", {}), ("greedy", {"greedy": True})):
        scored = scored_words(asr.load(restore=False, **options), utterances)
        lines += section(name, *scored)
    quiet.write_page(args.out, "confidence", lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
