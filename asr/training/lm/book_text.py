"""Book text for the word LM: Project Gutenberg paragraphs -> normalised sentences, one a line.

A paragraph is split where a sentence ends (. ! or ? and closing quotes, then a capital or a digit), except
after a title or an initial ("Mr. Smith", "J. R. Green"); bracketed notes ("[Illustration]", "[FN#3]") are
dropped; each sentence goes through the project's one normaliser (numbers spoken, upper case).

    for sentence in book_sentences(paragraph): ...
"""
from __future__ import annotations

import lzma
import re
from pathlib import Path
from typing import Iterator

from asr.text.normalize import normalize

_END = re.compile(r"(?<=[.!?])[\"')\]\u201d\u2019]*\s+(?=[\"'(\[\u201c\u2018]*[A-Z0-9])")
_NOTE = re.compile(r"\[[^\]]{0,80}\]")
_TITLES = {"MR", "MRS", "MESSRS", "DR", "ST", "MT", "JR", "SR", "REV", "PROF", "CAPT", "COL", "GEN", "LT", "SGT",
           "GOV", "HON", "VOL", "NO", "CH", "CHAP", "FIG", "VIZ", "VS", "ETC", "I.E", "E.G", "CF", "P", "PP"}


def _splits_after(piece: str) -> bool:
    """Whether a sentence really ends at the end of `piece` (not after a title or an initial)."""
    last = piece.rstrip("\"')]\u201d\u2019_*").rstrip(".!?").rsplit(None, 1)
    word = last[-1].lstrip("\"'([\u201c\u2018_*") if last else ""  # "_Mr." and "*Mr.": italics or bold around it
    return not (word.upper() in _TITLES or (len(word) == 1 and word.isalpha()))


def book_sentences(paragraph: str) -> list[str]:
    """The normalised sentences of one paragraph (empty ones dropped)."""
    pieces = _END.split(_NOTE.sub(" ", paragraph))
    sentences, current = [], ""
    for piece in pieces:
        current = f"{current} {piece}" if current else piece
        if _splits_after(piece):
            sentences.append(current)
            current = ""
    if current:
        sentences.append(current)
    return [s for s in (normalize(s) for s in sentences) if s]


def book_paragraphs(part: Path) -> Iterator[str]:
    """The paragraphs of one `books/part-*.txt.xz` file, one a line."""
    with lzma.open(part, "rt", encoding="utf-8") as f:
        yield from (line for line in f if line.strip())
