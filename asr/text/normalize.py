"""The one text normaliser: used for training targets, for scoring and for synthesis text.

Normalised text is upper case A-Z with apostrophes, words separated by single spaces.
Numbers are spelled out ("42" -> "FORTY TWO"); other symbols become spaces.
"""
from __future__ import annotations

import re
import unicodedata

_ONES = ("ZERO ONE TWO THREE FOUR FIVE SIX SEVEN EIGHT NINE TEN ELEVEN TWELVE THIRTEEN "
         "FOURTEEN FIFTEEN SIXTEEN SEVENTEEN EIGHTEEN NINETEEN").split()
_TENS = "_ _ TWENTY THIRTY FORTY FIFTY SIXTY SEVENTY EIGHTY NINETY".split()
_SCALES = ((10**9, "BILLION"), (10**6, "MILLION"), (1000, "THOUSAND"), (100, "HUNDRED"))
_SYMBOLS = {"&": " AND ", "%": " PERCENT ", "+": " PLUS ", "@": " AT "}


def number_to_words(n: int) -> str:
    """Spell a non-negative integer in English words, e.g. 1905 -> 'ONE THOUSAND NINE HUNDRED FIVE'."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + ("" if ones == 0 else " " + _ONES[ones])
    for scale, name in _SCALES:
        if n >= scale:
            head, rest = divmod(n, scale)
            return number_to_words(head) + " " + name + ("" if rest == 0 else " " + number_to_words(rest))
    raise AssertionError("unreachable")


def _spell_numbers(text: str) -> str:
    text = re.sub(r"(?<=\d),(?=\d{3})", "", text)  # 1,000 -> 1000
    return re.sub(r"\d+", lambda m: " " + number_to_words(int(m.group())) + " ", text)


def normalize(text: str) -> str:
    """Return the canonical form of `text`: 'Don't   stop, 2 go!' -> "DON'T STOP TWO GO"."""
    text = text.replace("\u2019", "'")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    for symbol, word in _SYMBOLS.items():
        text = text.replace(symbol, word)
    text = _spell_numbers(text).upper()
    text = re.sub(r"[^A-Z' ]+", " ", text)
    words = (w.strip("'") for w in text.split())
    return " ".join(w for w in words if w)
