"""How well a restorer does on held-out sentences: F1 per punctuation mark and casing accuracy.

A mark counts per word position: predicted where the reference has the same mark is a true positive,
anywhere else a false positive, and a reference mark not predicted there a false negative. Casing
accuracy is the share of words whose case class is right.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np

from asr.text.restore.labels import MARKS, Labelled, baseline

SCORED = {".": "period", ",": "comma", "?": "question", "!": "exclaim"}


@dataclass
class RestoreScore:
    tp: dict[int, int] = field(default_factory=dict)
    fp: dict[int, int] = field(default_factory=dict)
    fn: dict[int, int] = field(default_factory=dict)
    case_right: int = 0
    words: int = 0
    sentences: int = 0

    def add(self, ref_cases: list[int], ref_marks: list[int], cases: list[int], marks: list[int]) -> None:
        """One sentence: reference case and mark ids against the predicted ones (one per word each)."""
        for want, got in zip(ref_marks, marks):
            if want == got:
                if want:
                    self.tp[want] = self.tp.get(want, 0) + 1
            else:
                if got:
                    self.fp[got] = self.fp.get(got, 0) + 1
                if want:
                    self.fn[want] = self.fn.get(want, 0) + 1
        self.case_right += sum(a == b for a, b in zip(ref_cases, cases))
        self.words += len(ref_cases)
        self.sentences += 1

    def f1(self, mark: int) -> float:
        """F1 (0-100) of one mark; 0 when it was neither predicted right nor present."""
        tp, fp, fn = self.tp.get(mark, 0), self.fp.get(mark, 0), self.fn.get(mark, 0)
        return 200.0 * tp / (2 * tp + fp + fn) if tp else 0.0

    def case_accuracy(self) -> float:
        return 100.0 * self.case_right / self.words if self.words else 0.0

    def summary(self) -> dict[str, float]:
        """{"period_f1", "comma_f1", "question_f1", "exclaim_f1", "case_accuracy", "sentences"}."""
        out = {f"{name}_f1": round(self.f1(MARKS.index(mark)), 2) for mark, name in SCORED.items()}
        return {**out, "case_accuracy": round(self.case_accuracy(), 2), "sentences": self.sentences}


def score_restorer(sentences: Iterable[Labelled],
                   predict: Callable[[list[str]], tuple[list[int], list[int]]]) -> RestoreScore:
    """`predict(words) -> (cases, marks)` scored on reference sentences."""
    result = RestoreScore()
    for ref in sentences:
        cases, marks = predict(ref.words)
        result.add(ref.cases, ref.marks, cases, marks)
    return result


def score_baseline(sentences: Iterable[Labelled]) -> RestoreScore:
    """The trivial baseline (capitalise the first word, end with a period) on the same sentences."""
    return score_restorer(sentences, baseline)


def format_summary(name: str, summary: dict[str, float]) -> str:
    """One line: `name: period_f1=.. comma_f1=.. question_f1=.. exclaim_f1=.. case_accuracy=.. sentences=N`."""
    return f"{name}: " + " ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in summary.items())


def time_restore(restore: Callable[[str], str], sentences: Iterable[Labelled]) -> dict[str, float]:
    """Median and p95 milliseconds of `restore` (a Restorer's) on each sentence's plain words."""
    times = []
    for item in sentences:
        text = " ".join(item.words)
        began = time.perf_counter()
        restore(text)
        times.append((time.perf_counter() - began) * 1000)
    return {"median": round(float(np.median(times)), 3), "p95": round(float(np.percentile(times, 95)), 3)}
