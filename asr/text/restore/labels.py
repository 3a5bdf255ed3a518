"""What the restorer predicts per word, and how labels turn plain words into text people read.

Each normalised word (`asr.text.normalize`: upper case A-Z and apostrophes) gets a case class
(CASES: lower, Capitalised, UPPER) and the mark that follows it (MARKS: none . , ? !). `labelled`
reads these labels off a cased, punctuated sentence (the training targets); `render` applies them.
Torch-free: the runtime uses it with either backend.
"""
from __future__ import annotations

import bisect
import re
import unicodedata
from typing import Sequence
from dataclasses import dataclass

from asr.text.normalize import TITLES, normalize

CASES = ("lower", "capital", "upper")
MARKS = ("", ".", ",", "?", "!")
LOWER, CAPITAL, UPPER = range(3)
NONE, PERIOD, COMMA, QUESTION, EXCLAIM = range(5)
ENDS = (PERIOD, QUESTION, EXCLAIM)  # the marks that end a sentence
_WORD = re.compile(r"[A-Za-z']+")
# The pause before a word, as the network sees it: 0 unknown (plain text), 1 the first word of a final,
# then bins of the seconds from the previous word's end (word times come in 40 ms frames).
NO_PAUSE, START = 0, 1
PAUSE_EDGES = (0.02, 0.06, 0.1, 0.14, 0.2, 0.28, 0.4, 0.56, 0.8, 1.2)
PAUSE_BUCKETS = 2 + len(PAUSE_EDGES) + 1


@dataclass
class Labelled:
    """A sentence as the restorer sees it: its normalised words and each word's case and mark ids."""
    words: list[str]
    cases: list[int]
    marks: list[int]


def case_of(word: str) -> int:
    """The case class of a word as written: 'the' lower, 'The' / 'I' capital, 'NASA' / "NASA's" upper
    (the letters after an apostrophe count only when a single letter comes before it, as in O'Brien)."""
    head = word.split("'")[0]
    letters = [c for c in (head if len(head) > 1 else word) if c.isalpha()]
    if not letters or not letters[0].isupper():
        return LOWER
    if len(letters) > 1 and all(c.isupper() for c in letters):
        return UPPER
    return CAPITAL


def mark_of(between: str) -> int:
    """The mark that the text between two words stands for: ? and ! first, then a period (an ellipsis
    too), then a comma (; : and dashes count as one)."""
    for char, mark in (("?", QUESTION), ("!", EXCLAIM), (".", PERIOD)):
        if char in between:
            return mark
    if any(c in between for c in ",;:") or any(dash in between for dash in ("--", " -", "- ")):
        return COMMA  # a hyphen inside a word ("well-known") is no mark
    return NONE


def labelled(sentence: str) -> Labelled | None:
    """The labels a cased, punctuated sentence gives its normalised words; None when the sentence
    does not map word for word onto its normalised form (numbers, symbols) or has no word. A title is its
    word as said ("Mr." -> MISTER, Capitalised), its period no mark."""
    folded = unicodedata.normalize("NFKD", sentence.replace("\u2019", "'")).encode("ascii", "ignore").decode()
    spans = [(m.start(), m.end(), m.group().strip("'")) for m in _WORD.finditer(folded)]
    spans = [(a, b + (w.upper() in TITLES and folded[b:b + 1] == "."), w) for a, b, w in spans if w]
    words = [TITLES.get(w.upper(), w.upper()) for _, _, w in spans]
    if not words or " ".join(words) != normalize(sentence):
        return None
    cases = [case_of(w) for _, _, w in spans]
    marks = [mark_of(folded[spans[i][1]:spans[i + 1][0] if i + 1 < len(spans) else len(folded)])
             for i in range(len(spans))]
    return Labelled(words, cases, marks)


def cased(word: str, case: int) -> str:
    """An upper-case word in a case class: DON'T -> don't / Don't / DON'T (NASA'S -> NASA's)."""
    if case == UPPER:
        return word[:-1] + "s" if word.endswith("'S") and len(word) > 3 else word
    if case == CAPITAL:
        return word[:1] + word[1:].lower()
    return word.lower()


def render(words: list[str], cases: list[int], marks: list[int], spelled: Sequence[str | None] | None = None) -> str:
    """Plain words and their labels -> the text people read: one token per word, marks attached; `spelled`: a
    word's own spelling where given ("Mr.", which takes no second period), else the word in its case."""
    spelled = spelled or [None] * len(words)
    return " ".join(own + ("" if own.endswith(".") and m == PERIOD else MARKS[m]) if own else cased(w, c) + MARKS[m]
                    for w, c, m, own in zip(words, cases, marks, spelled))


def pause_ids(pauses: Sequence[float] | None, n: int) -> list[int]:
    """The pause id of each of n words: pauses[i] is the seconds before word i (pauses[0] is not used: the
    first word gets START); None: no pause information (every word NO_PAUSE)."""
    if pauses is None:
        return [NO_PAUSE] * n
    if len(pauses) != n:
        raise ValueError(f"{len(pauses)} pauses for {n} words")
    return [START] * min(n, 1) + [2 + bisect.bisect_right(PAUSE_EDGES, p) for p in pauses[1:]]


def word_pauses(starts: Sequence[float], ends: Sequence[float]) -> list[float]:
    """Seconds from each word's previous word's end to its start (0.0 for the first word)."""
    return [0.0] + [max(0.0, s - e) for s, e in zip(starts[1:], ends[:-1])]


def baseline(words: list[str]) -> tuple[list[int], list[int]]:
    """The trivial restorer: capitalise the first word, end with a period (cases, marks)."""
    cases = [CAPITAL if i == 0 else LOWER for i in range(len(words))]
    marks = [PERIOD if i == len(words) - 1 else NONE for i in range(len(words))]
    return cases, marks
