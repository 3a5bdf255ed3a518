"""A final's labels in its stream: the restorer reads the words before it, and the endpoint decides its end.

A stream's finals are cut at endpoints, and a cut may fall inside a sentence. Each final is restored with the
last words of the finals before it (`Context`, kept per stream) in front of its own, so that the restorer sees
across the cut, and then:
- a final that follows a sentence end starts with a capital; one that continues a sentence does not capitalise
  its first word for the cut (a name keeps its capital, and so does a word after a title: "Mr." / "Thornton");
- no final ends in a comma: its end is decided at its endpoint, once, from the restorer's mark on its last
  word and the silence after it. A sentence end (. ? !) stays; a comma, or a last word no sentence ends on
  ("the", "of", "and": OPEN), means the sentence goes on in the next final (no mark); no mark is a sentence
  end after SENTENCE_PAUSE of silence (the restorer reads the pause before a word, never the one after its
  last), else the sentence goes on (a segment cut at its longest). The stream's last final ends a sentence;
- titles are written as titles (`asr.text.restore.titles`), across the cut too.
Finals are never changed again, so the words before a final only inform it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from asr.text.restore.labels import CAPITAL, COMMA, ENDS, LOWER, NONE, PERIOD, word_pauses
from asr.text.restore.restorer import Restorer
from asr.text.restore.titles import titled

WORDS_BEFORE = 8  # words of the finals before that the restorer reads in front of a final
OPEN = frozenset("A AN THE AND OR BUT NOR OF MY YOUR OUR THEIR".split())  # no sentence ends on these
SENTENCE_PAUSE = 0.3  # seconds of silence after a final's last word that end its sentence where it has no mark

Times = Sequence[tuple[float, float]]  # (start, end) seconds of each word


@dataclass
class Context:
    """What a stream's next final follows: the last words of the finals before it (plain) with their times
    (empty when some were untimed) and whether the last final ended its sentence (True at the stream's start)."""
    words: list[str] = field(default_factory=list)
    times: list[tuple[float, float]] = field(default_factory=list)
    ended: bool = True

    def follow(self, words: list[str], times: Times | None, ended: bool) -> None:
        """Move on past a final of `words` (timed by `times`, or None) that `ended` its sentence or not."""
        if times is None:
            self.words, self.times = (self.words + list(words))[-WORDS_BEFORE:], []
        elif len(self.times) != len(self.words):  # the words before were untimed: keep this final's alone
            self.words, self.times = list(words)[-WORDS_BEFORE:], list(times)[-WORDS_BEFORE:]
        else:
            self.words = (self.words + list(words))[-WORDS_BEFORE:]
            self.times = (self.times + list(times))[-WORDS_BEFORE:]
        self.ended = ended


def _is_i(word: str) -> bool:
    return word.split("'")[0] == "I"


def final_labels(restorer: Restorer, words: list[str], times: Times | None = None, context: Context | None = None,
                 after: float = math.inf) -> tuple[list[int], list[int], list[str | None]]:
    """(cases, marks, title spellings) of a final's plain `words` (`times`: each word's (start, end), or None),
    restored after `context` (None: a final on its own) by the rules above; `after`: the seconds of silence
    after it before the stream goes on (math.inf: the stream ends there). `context`, when given, is moved on
    past this final."""
    if not words:
        return [], [], []
    before = context or Context()
    timed = times is not None and len(times) == len(words)
    every = before.words + words
    pauses = None
    if timed and len(before.times) == len(before.words):
        spans = before.times + list(times)
        pauses = word_pauses([a for a, _ in spans], [b for _, b in spans])
    cases, marks = restorer.labels(every, pauses)
    last = after == math.inf
    spelled = titled(every, cases, marks, more=not last)
    k = len(before.words)
    boundary = marks[k - 1] if k else PERIOD  # the restorer's mark before the final, seeing both sides
    cases, marks, spelled = cases[k:], marks[k:], spelled[k:]
    if before.ended:
        cases[0] = CAPITAL if cases[0] == LOWER else cases[0]
    elif boundary in ENDS and cases[0] == CAPITAL and not _is_i(words[0]):
        cases[0] = LOWER  # capitalised as a sentence start, but the final before did not end one
    if last and spelled[-1] is None:
        marks[-1] = marks[-1] if marks[-1] in ENDS else PERIOD
    elif marks[-1] == COMMA or words[-1] in OPEN or spelled[-1] is not None:
        marks[-1] = NONE
    elif marks[-1] == NONE and after >= SENTENCE_PAUSE:
        marks[-1] = PERIOD
    if context is not None:
        context.follow(words, times if timed else None, marks[-1] in ENDS)
    return cases, marks, spelled
