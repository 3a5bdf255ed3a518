"""Labels for recognized words: align them to a cased, punctuated reference and carry its case and marks.

The recognizer's words differ from the reference's (deletions, substitutions, insertions), so the
labels a reader would want on them are carried over a Levenshtein alignment of the normalised words:

  - a matched or substituted word takes the reference word's case class and following mark;
  - an inserted word is lower case with no mark;
  - a deleted word's mark moves to the recognized word before it (a sentence end wins over a comma;
    none when nothing was recognized before it);
  - sentence starts follow the carried marks: the first word, and each word after . ? or !, is
    Capitalised if it was carried lower case, and a word carried Capitalised because it began a
    reference sentence is lower case where it no longer begins one (but for I, I'M, ...; a proper
    noun that began a reference sentence is taken for an ordinary word here, a rare miss).

The same rules label the simulated recognition errors of training (`asr.text.restore.noise`), the real
recognizer outputs of training audio, and the held-out audio the restorer is scored on.
"""
from __future__ import annotations

from asr.text.restore.labels import CAPITAL, COMMA, ENDS, LOWER, NONE, Labelled

Pair = tuple[int | None, int | None]  # (reference index, recognized index); None: inserted / deleted


def strength(mark: int) -> int:
    """How much a mark weighs when two land on one word: sentence ends over a comma over none."""
    return 2 if mark in ENDS else 1 if mark == COMMA else 0


GAP, SUB = 3, 4  # sclite's weights: a deletion and an insertion beat two substitutions, one substitution beats both


def align(ref: list[str], hyp: list[str]) -> list[Pair]:
    """A minimum-cost alignment of two word lists, in order (insertions and deletions cost 3, substitutions 4)."""
    n, m = len(ref), len(hyp)
    cost = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        cost[i][0] = GAP * i
    for j in range(m + 1):
        cost[0][j] = GAP * j

    def diagonal(i: int, j: int) -> int:
        return cost[i - 1][j - 1] + (SUB if ref[i - 1] != hyp[j - 1] else 0)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            cost[i][j] = min(diagonal(i, j), cost[i - 1][j] + GAP, cost[i][j - 1] + GAP)
    pairs: list[Pair] = []
    i, j = n, m
    while i or j:
        if i and j and cost[i][j] == diagonal(i, j):
            i, j = i - 1, j - 1
            pairs.append((i, j))
        elif i and cost[i][j] == cost[i - 1][j] + GAP:
            i -= 1
            pairs.append((i, None))
        else:
            j -= 1
            pairs.append((None, j))
    return pairs[::-1]


def carry(ref: Labelled, hyp_len: int, pairs: list[Pair]) -> tuple[list[int], list[int]]:
    """(cases, marks) of `hyp_len` recognized words aligned to `ref` by `pairs` (the rules above)."""
    cases, marks = [LOWER] * hyp_len, [NONE] * hyp_len
    began = [False] * hyp_len  # carried a capital that began a reference sentence
    last: int | None = None  # the recognized word before the current pair
    for r, h in pairs:
        if h is not None:
            last = h
            if r is not None:
                cases[h], marks[h] = ref.cases[r], ref.marks[r]
                began[h] = (ref.cases[r] == CAPITAL and (r == 0 or ref.marks[r - 1] in ENDS)
                            and ref.words[r].split("'")[0] != "I")
        elif last is not None and strength(ref.marks[r]) > strength(marks[last]):
            marks[last] = ref.marks[r]
    for h in range(hyp_len):
        starts = h == 0 or marks[h - 1] in ENDS
        if starts and cases[h] == LOWER:
            cases[h] = CAPITAL
        elif not starts and began[h]:
            cases[h] = LOWER
    return cases, marks


def carry_labels(ref: Labelled, hyp: list[str]) -> Labelled:
    """The recognized words `hyp` with the labels carried from `ref` over their alignment."""
    return Labelled(list(hyp), *carry(ref, len(hyp), align(ref.words, hyp)))
