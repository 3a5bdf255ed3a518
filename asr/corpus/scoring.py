"""Scoring: word and character error counts of hypotheses against references (jiwer), and their sums.

References and hypotheses are compared after `asr.text.normalize`, by whoever calls `score`; `score` then spells
their number phrases one way (`asr.text.normalize.comparable`: "A HUNDRED AND EIGHT" as the written form's "108").
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import jiwer

from asr.text.normalize import comparable


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
    ref, hyp = comparable(ref), comparable(hyp)
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


def totals(results: list[UttResult]) -> tuple[Score, Score]:
    """Summed word and character scores of `results`."""
    return Score.total(r.words for r in results), Score.total(r.chars for r in results)


def by_speaker(results: list[UttResult]) -> list[tuple[str, int, Score, Score]]:
    """(speaker, utterances, word score, character score) per speaker, highest WER first."""
    groups: dict[str, list[UttResult]] = {}
    for r in results:
        groups.setdefault(r.speaker, []).append(r)
    rows = [(speaker, len(group), *totals(group)) for speaker, group in groups.items()]
    return sorted(rows, key=lambda row: (-row[2].rate(), row[0]))
