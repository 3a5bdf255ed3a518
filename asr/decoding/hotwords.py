"""Hotword lists: the user's own words and phrases, each with a boost for the beam search.

A list is text, one word or phrase a line, with an optional boost as the line's last field:

    jessica pemberton 3.0
    okonkwo
    # a comment; blank lines are skipped

Words are normalised like every transcript (`asr.text.normalize`) and must be spellable with the
acoustic model's units. A line without a boost gets `DEFAULT_BOOST`. A word written with a capital
("Jessica Pemberton", "iPhone") keeps that spelling in restored finals (`Hotword.written`). Anything unusable raises
`HotwordError`, one line naming the source and the line number.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from asr.text.normalize import TITLES, normalize
from asr.text.tokenizer import Tokenizer

DEFAULT_BOOST = 10.0  # added to the search's score (natural-log units) for each word of a listed phrase
MAX_BOOST = 50.0
MAX_LINES = 10000
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_BOOSTISH = re.compile(r"[\d.eE+-]+")  # a last field of these (with a digit) is meant as the boost
_ALLOWED = set(" '-.")  # besides letters: spaces, apostrophes, hyphens and periods ("st. john")


class HotwordError(ValueError):
    """A hotword list that cannot be used; the message names the source, the line and the reason."""


@dataclass(frozen=True)
class Hotword:
    words: tuple[str, ...]  # normalised words of the phrase
    boost: float  # per word, in the search's score units
    written: tuple[str, ...] = field(default=(), compare=False)  # each word as the list spells it where that has
    # a capital ("Pemberton", "iPhone"; "" for a word written all lower case): restored finals keep it


def _spellable_text(text: str) -> str | None:
    """The first character the model cannot spell (digits, symbols, letters with no ASCII form), or None."""
    for char in text:
        if char.isspace() or char in _ALLOWED:
            continue
        folded = unicodedata.normalize("NFKD", char).encode("ascii", "ignore").decode()
        if not (folded and folded.isalpha()):
            return char
    return None


def parse_line(line: str, tokenizer: Tokenizer) -> Hotword | None:
    """One line -> a Hotword (None for a blank line or a comment); ValueError with the reason."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    fields = line.split()
    boost = DEFAULT_BOOST
    if len(fields) > 1 and _BOOSTISH.fullmatch(fields[-1]) and any(c.isdigit() for c in fields[-1]):
        if not _NUMBER.fullmatch(fields[-1]):
            raise ValueError(f"bad boost {fields[-1]!r} (a number > 0, e.g. 3.0)")
        boost = float(fields[-1])
        if not 0 < boost <= MAX_BOOST:
            raise ValueError(f"boost {fields[-1]} must be > 0 and <= {MAX_BOOST:g}")
        fields = fields[:-1]
    phrase = " ".join(fields)
    bad = _spellable_text(phrase)
    if bad is not None:
        raise ValueError(f"{phrase!r} cannot be spelled with the model's units ({bad!r}; write numbers as words)")
    words = tuple(normalize(phrase).split())
    if not words:
        raise ValueError(f"{phrase!r} has no word")
    for word in words:
        if "<unk>" in tokenizer.spell(word):
            raise ValueError(f"{word!r} cannot be spelled with the model's units")
    return Hotword(words, boost, _spellings(phrase, words))


def _spellings(phrase: str, words: tuple[str, ...]) -> tuple[str, ...]:
    """The phrase's spelling of each of its normalised `words` where it holds a capital, "" elsewhere (a title
    too: restored finals write it "St.", and "" for every word where the phrase's letters do not line up with
    them one to one)."""
    folded = unicodedata.normalize("NFKD", phrase.replace("\u2019", "'")).encode("ascii", "ignore").decode()
    runs = [run.strip("'") for run in re.findall(r"[A-Za-z']+", folded)]
    runs = [run for run in runs if run]
    if len(runs) != len(words) or any(TITLES.get(run.upper(), run.upper()) != word for run, word in zip(runs, words)):
        return ("",) * len(words)
    return tuple(run if run != run.lower() and run.upper() not in TITLES else "" for run in runs)  # titles: "St."


def parse_hotwords(lines: list[str], source: str, tokenizer: Tokenizer) -> list[Hotword]:
    """Lines of a hotword list -> its hotwords (a phrase listed twice keeps its last boost).
    HotwordError "SOURCE:LINE: reason" for a bad line, or "SOURCE: no hotwords" for an empty list."""
    if len(lines) > MAX_LINES:
        raise HotwordError(f"{source}: more than {MAX_LINES} lines")
    found: dict[tuple[str, ...], Hotword] = {}
    for number, line in enumerate(lines, start=1):
        if not isinstance(line, str):
            raise HotwordError(f"{source}:{number}: not text")
        try:
            hotword = parse_line(line, tokenizer)
        except ValueError as err:
            raise HotwordError(f"{source}:{number}: {err}") from None
        if hotword is not None:
            found[hotword.words] = hotword
    if not found:
        raise HotwordError(f"{source}: no hotwords (one word or phrase a line, an optional boost after it)")
    return list(found.values())


def read_hotwords(path: str | Path, tokenizer: Tokenizer) -> list[Hotword]:
    """A hotword file -> its hotwords; HotwordError naming the file (and line) if it cannot be used."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise HotwordError(f"{path}: cannot read the hotword file ({err.strerror or err})") from None
    if b"\0" in data:
        raise HotwordError(f"{path}: not a text file (binary data)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise HotwordError(f"{path}:{line}: not UTF-8 text") from None
    return parse_hotwords(text.splitlines(), str(path), tokenizer)
