"""The one normaliser: used for training targets, LM text, lexicon words, scoring and synthesis text.

Normalised text is upper case A-Z with apostrophes, words separated by single spaces, the words as readers
say them:
- titles as said: "Mr." / "MR" -> MISTER, "Mrs." -> MISSUS, "Dr." -> DOCTOR, "St." -> SAINT ("Baker St." after
  a capitalised word and before none: STREET); the spoken words are left as they are, so a reference "MR" and a
  hypothesis "MISTER" normalise alike;
- years as said: a four-digit number from 1100 to 1999 (no thousands comma) in pairs, "1840" -> EIGHTEEN FORTY,
  "1905" -> NINETEEN OH FIVE, "1600" -> SIXTEEN HUNDRED, and decades, "1920s" -> NINETEEN TWENTIES;
- ordinals, "21st" -> TWENTY FIRST;
- money as said: "$25" -> TWENTY FIVE DOLLARS, "£300,000" -> THREE HUNDRED THOUSAND POUNDS, "$1" -> ONE DOLLAR,
  "$3 million" -> THREE MILLION DOLLARS, "$2.50" -> TWO DOLLARS FIFTY CENTS, "50¢" -> FIFTY CENTS;
- decimals digit by digit after the point, "1.5" -> ONE POINT FIVE;
- other numbers spelled out as before ("42" -> FORTY TWO, "1,500" and "2005" -> ONE THOUSAND FIVE HUNDRED and TWO
  THOUSAND FIVE); & % + @ as words; other symbols become spaces.

`comparable` is for scoring only: it also gives number phrases one spelling ("A HUNDRED AND EIGHT" and the written
form's "108", ONE HUNDRED EIGHT, alike), a distinction the written form cannot keep.
"""
from __future__ import annotations

import re
import unicodedata

_ONES = ("ZERO ONE TWO THREE FOUR FIVE SIX SEVEN EIGHT NINE TEN ELEVEN TWELVE THIRTEEN "
         "FOURTEEN FIFTEEN SIXTEEN SEVENTEEN EIGHTEEN NINETEEN").split()
_TENS = "_ _ TWENTY THIRTY FORTY FIFTY SIXTY SEVENTY EIGHTY NINETY".split()
_SCALES = ((10**9, "BILLION"), (10**6, "MILLION"), (1000, "THOUSAND"), (100, "HUNDRED"))
_SYMBOLS = {"&": " AND ", "%": " PERCENT ", "+": " PLUS ", "@": " AT "}
_IRREGULAR_ORDINALS = {"ONE": "FIRST", "TWO": "SECOND", "THREE": "THIRD", "FIVE": "FIFTH", "EIGHT": "EIGHTH",
                       "NINE": "NINTH", "TWELVE": "TWELFTH"}
TITLES = {"MR": "MISTER", "MRS": "MISSUS", "DR": "DOCTOR", "ST": "SAINT"}  # abbreviation -> as said

_CURRENCIES = {"$": ("DOLLAR", "CENT"), "\u00a3": ("POUND", "PENNY"), "\u20ac": ("EURO", "CENT")}  # $ £ €
_PLURALS = {"PENNY": "PENCE"}
_MONEY = re.compile(r"([$\u00a3\u20ac])\s?(\d[\d,]*)(?:\.(\d\d)(?!\d))?(\.\d+)?"  # symbol, amount, cents, decimals
                    r"(\s+(?:thousand|million|billion)\b)?", re.I)  # and a scale: "$3 million"
_CENTS = re.compile(r"(\d+)\s?\u00a2")  # 50¢
_DECIMAL = re.compile(r"(\d)\.(\d+)")
_SCALE_WORDS = {"HUNDRED", "THOUSAND", "MILLION", "BILLION"}
_NUMBER_WORDS = set(_ONES + _TENS[2:]) | _SCALE_WORDS
_JOINED_BY_AND = _SCALE_WORDS | {"DOLLARS", "POUNDS", "EUROS"}  # "HUNDRED AND EIGHT", "DOLLARS AND FIFTY CENTS"
_TITLE = re.compile(r"(?<![^\W_])(Mrs|Mr|Dr|St)(?![^\W_])\.?", re.I)  # a word of its own; "_Mr." (italics) too
_STREET_BEFORE = re.compile(r"\b[A-Z][a-z]+\s+$")  # "Baker " before "St."
_NAME_AFTER = re.compile(r"\s+[A-Z]")
_ORDINAL = re.compile(r"(?<![^\W_])(\d+)(st|nd|rd|th)(?![^\W_])", re.I)  # "_1st Q_" (italics) too
_YEAR = re.compile(r"(?<![\d,.])(1[1-9]\d\d)('?s\b)?(?![\d]|[,.]\d)")


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


def year_to_words(year: int) -> str:
    """A year from 1100 to 1999 as readers say it, in two pairs: 1840 -> 'EIGHTEEN FORTY', 1905 -> 'NINETEEN OH
    FIVE', 1600 -> 'SIXTEEN HUNDRED'."""
    head, tail = divmod(year, 100)
    return number_to_words(head) + " " + ("HUNDRED" if tail == 0 else f"OH {_ONES[tail]}" if tail < 10
                                          else number_to_words(tail))


def _ordinal(words: str) -> str:
    """'TWENTY ONE' -> 'TWENTY FIRST', 'FORTY' -> 'FORTIETH', 'ONE HUNDRED' -> 'ONE HUNDREDTH'."""
    *head, last = words.split()
    last = _IRREGULAR_ORDINALS.get(last) or (last[:-1] + "IETH" if last.endswith("Y") else last + "TH")
    return " ".join(head + [last])


def _plural(words: str) -> str:
    """'NINETEEN TWENTY' -> 'NINETEEN TWENTIES', 'EIGHTEEN HUNDRED' -> 'EIGHTEEN HUNDREDS'."""
    return words[:-1] + "IES" if words.endswith("Y") else words + "S"


def _title(match: re.Match) -> str:
    abbreviation = match.group(1).upper()
    before, after = match.string[:match.start()], match.string[match.end():]
    if match.group(1) == "St" and _STREET_BEFORE.search(before) and not _NAME_AFTER.match(after):
        return " STREET "
    return f" {TITLES[abbreviation]} "


def _unit(name: str, amount: str) -> str:
    return name if amount.lstrip("0") == "1" else _PLURALS.get(name, name + "S")


def _money(match: re.Match) -> str:
    """'$25' -> ' 25 DOLLARS ', '£2.50' -> ' 2 POUNDS 50 PENCE ', '$1.5 million' -> ' 1.5 million DOLLARS '."""
    main, minor = _CURRENCIES[match.group(1)]
    amount, cents, decimals, scale = match.group(2), match.group(3), match.group(4) or "", match.group(5)
    if scale or decimals:  # $3 million, $1.5 million, $1.234
        return f" {amount}{'.' + cents if cents else ''}{decimals}{scale or ''} {main}S "
    said = f" {amount} {_unit(main, amount.replace(',', ''))} "
    return said + (f"{cents} {_unit(minor, cents)} " if cents and int(cents) else "")


def _spell_numbers(text: str) -> str:
    text = _ORDINAL.sub(lambda m: f" {_ordinal(number_to_words(int(m.group(1))))} ", text)
    text = _YEAR.sub(lambda m: " " + (_plural if m.group(2) else str)(year_to_words(int(m.group(1)))) + " ", text)
    text = _DECIMAL.sub(lambda m: f"{m.group(1)} POINT {' '.join(m.group(2))} ", text)  # 1.25 -> 1 POINT 2 5
    text = re.sub(r"(?<=\d),(?=\d{3})", "", text)  # 1,000 -> 1000
    return re.sub(r"\d+", lambda m: " " + number_to_words(int(m.group())) + " ", text)


def normalize(text: str) -> str:
    """Return the canonical form of `text`: 'Don't   stop, 2 go!' -> "DON'T STOP TWO GO"."""
    text = text.replace("\u2019", "'")
    text = _CENTS.sub(r" \1 CENTS ", _MONEY.sub(_money, text))  # before the symbols leave with the non-ASCII
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    for symbol, word in _SYMBOLS.items():
        text = text.replace(symbol, word)
    text = _spell_numbers(_TITLE.sub(_title, text)).upper()
    text = re.sub(r"[^A-Z' ]+", " ", text)
    words = (w.strip("'") for w in text.split())
    return " ".join(w for w in words if w)


def comparable(normalised: str) -> str:
    """Normalised text with its number phrases spelled one way, for scoring only: "A HUNDRED" -> ONE HUNDRED, and
    no AND after HUNDRED, THOUSAND, MILLION, BILLION or a currency before a number word ("A HUNDRED AND EIGHT" ->
    ONE HUNDRED EIGHT, as "108" normalises). The written form turns both spellings into the same figures."""
    words = normalised.split()
    kept = []
    for i, word in enumerate(words):
        after = words[i + 1] if i + 1 < len(words) else ""
        if word == "A" and after in _SCALE_WORDS:
            word = "ONE"
        elif word == "AND" and kept and kept[-1] in _JOINED_BY_AND and after in _NUMBER_WORDS - _SCALE_WORDS:
            continue
        kept.append(word)
    return " ".join(kept)
