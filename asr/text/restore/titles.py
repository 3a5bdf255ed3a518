"""Titles as written in a restored final: MISTER / MR -> "Mr.", MISSUS / MRS -> "Mrs.", DOCTOR / DR -> "Dr.",
SAINT / ST -> "St.", with the name after them capitalised.

The recognizer says a title as readers do (MISTER, `asr.text.normalize`), and the restorer, which rarely saw
the spoken words, lower-cases the name after one ("Would mister thornton"). On the restorer's labels:
- MISTER, MISSUS and the abbreviations are always titles (unless a ? or ! follows: "Hey, mister!", or they
  are the last word of a stream: "Hey mister.");
- DOCTOR and SAINT are titles only before a name: the restorer capitalised the next word (and not as a
  sentence start), and no determiner comes before ("the doctor said" stays, "Doctor Watson" is Dr. Watson);
- a title takes no mark of its own (its period is its spelling) and capitalises the word after it.
"""
from __future__ import annotations

from asr.text.restore.labels import CAPITAL, ENDS, EXCLAIM, LOWER, NONE, QUESTION

ALWAYS = {"MISTER": "Mr.", "MR": "Mr.", "MISSUS": "Mrs.", "MRS": "Mrs.", "DR": "Dr.", "ST": "St."}
BEFORE_A_NAME = {"DOCTOR": "Dr.", "SAINT": "St."}
DETERMINERS = frozenset("A AN THE THIS THAT THESE THOSE MY YOUR HIS HER OUR THEIR ITS EVERY NO ANY SOME EACH "
                        "ONE GOOD OLD".split())


def _is_title(i: int, words: list[str], cases: list[int], marks: list[int], more: bool) -> bool:
    if words[i] in ALWAYS:
        return marks[i] not in (QUESTION, EXCLAIM) and (more or i + 1 < len(words))
    return (words[i] in BEFORE_A_NAME and i + 1 < len(words) and cases[i + 1] != LOWER
            and marks[i] not in ENDS and (i == 0 or words[i - 1] not in DETERMINERS))


def titled(words: list[str], cases: list[int], marks: list[int], more: bool = False) -> list[str | None]:
    """The spelling of each word that is a title ("Mr."; None for the others), its mark and the next word's
    case set as above (`cases` and `marks` are changed in place); `more`: words may follow the last one (in
    the stream's next final)."""
    spelled: list[str | None] = [None] * len(words)
    for i in range(len(words)):
        if _is_title(i, words, cases, marks, more):
            spelled[i] = ALWAYS.get(words[i]) or BEFORE_A_NAME[words[i]]
            marks[i] = NONE
            if i + 1 < len(words) and cases[i + 1] == LOWER:
                cases[i + 1] = CAPITAL
    return spelled
