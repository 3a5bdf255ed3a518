"""The written form of a final (inverse text normalisation): numbers as people write them.

    WrittenForm()("I paid twenty five dollars at three thirty.")    # 'I paid $25 at 3:30.'

It is damga's English inverse normaliser (precompiled grammars run by its own native library: no pynini,
no torch; chosen by measurement, benchmarks/itn/itn_choice.md), on the restorer's cased, punctuated text, with:
- the restorer's habits undone where they hide a number from the grammar ("a. m.", and a comma inside a
  number: "nine, oh, five");
- two mistakes of damga 1.0.5 mended ("two thousand and five hundred" -> "2005 hundred"; compound minutes
  before a.m./p.m., "eleven forty five p m" -> "11:40 5 p.m.");
- the grammar run only on windows of words around number words: its cost grows faster than the text's
  length, and most finals hold no number at all;
- our convention kept where damga's differs: "the fifth of March" -> "the 5th of March" (not "5 March"),
  and idioms ("the eleventh hour") and clock phrases ("half past three") keep their words;
- years said in pairs written in figures for every century from the 1300s to the 1900s ("fourteen sixty five"
  -> 1465, "thirteen oh five" -> 1305, "fourteen hundred" -> 1400), where damga writes only some ("nineteen
  ninety nine" but not "fourteen sixty five"); ELEVEN and TWELVE are left to damga, which reads them as times.
One to nine stay words, as do first to ninth (AP style, damga's default); money, percentages, decimals,
times, dates and years are written in figures. `benchmarks/itn/itn.md` measures it.
"""
from __future__ import annotations

import re
from functools import cached_property

_DIGITS = "one two three four five six seven eight nine".split()
_NUMBERS = _DIGITS + ("zero oh ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen "
                      "twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million billion").split()
_ORDINALS = ("first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth "
             "fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth thirtieth fortieth "
             "fiftieth sixtieth seventieth eightieth ninetieth hundredth thousandth millionth").split()
NUMBER_WORDS = frozenset(_NUMBERS + _ORDINALS + ["half", "quarter"])  # a window of the grammar opens at these
WINDOW = 3  # words either side of a number word that the grammar sees

_ANY_NUMBER = "|".join(_NUMBERS)
_AM_PM = re.compile(r"\b([ap])\. ?m\.", re.I)  # the restorer's "a. m." -> "a m", which the grammar reads
_COMMA_IN_NUMBER = re.compile(rf"\b({_ANY_NUMBER}),(?= (?:and )?(?:{_ANY_NUMBER})\b)", re.I)
_THOUSAND_AND_HUNDREDS = re.compile(rf"\b(thousand) and ({'|'.join(_DIGITS)}) (hundred)\b", re.I)
_SPLIT_MINUTES = re.compile(r"\b(\d{1,2}):([1-5])0 ([1-9]) ([ap]\.m\.)")  # "11:40 5 p.m." -> "11:45 p.m."
_TEENS = "ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_YEAR = re.compile(r"\b(%s) (?:oh (%s)|(hundred)|(%s)(?:[ -](%s))?|(%s))\b" % (
    "|".join(_TEENS[3:]), "|".join(_DIGITS), "|".join(_TENS), "|".join(_DIGITS), "|".join(_TEENS)), re.I)
_NOT_AROUND_A_YEAR = frozenset(_NUMBERS + ["point", "dollars", "dollar", "cents", "pounds", "percent"])

# Where damga follows another convention than ours, these spans are not given to it: idioms and clock phrases
# keep their words, and "the fifth of March" keeps its shape ("the 5th of March", not "5 March").
_HOURS = "|".join(_DIGITS + ["ten", "eleven", "twelve"])
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_ORDINAL_VALUES = {word: i for i, word in enumerate(_ORDINALS[:20], start=1)} | {"thirtieth": 30}
_ORDINAL_VALUES |= {f"{tens} {word}": base + i for tens, base in (("twenty", 20), ("thirty", 30))
                    for i, word in enumerate(_ORDINALS[:9], start=1) if base + i <= 31}
_KEPT = re.compile(r"\b(?:the eleventh hour|the fourth of july|(?:half|quarter) past (?:%s)|quarter to (?:%s))\b"
                   % (_HOURS, _HOURS), re.I)
_NTH_OF_MONTH = re.compile(r"\bthe (%s) of (%s)\b" % ("|".join(sorted(_ORDINAL_VALUES, key=len, reverse=True)),
                                                      _MONTHS), re.I)


class WrittenForm:
    """Spoken-form text (cased and punctuated, or plain) -> its written form. The grammar loads on first use
    (about 0.1 s, 25 MB)."""

    @cached_property
    def _grammar(self):
        from damga import InverseNormalizer
        return InverseNormalizer(lang="en")

    def _grammar_on(self, text: str) -> str:
        """damga's written form of `text` (mended), keeping the spaces around it."""
        core = text.strip()
        if not core:
            return text
        written = self._grammar.normalize(_THOUSAND_AND_HUNDREDS.sub(r"\1 \2 \3", core))
        lead, trail = text[:len(text) - len(text.lstrip())], text[len(text.rstrip()):]
        return lead + _SPLIT_MINUTES.sub(r"\1:\g<2>\3 \4", written) + trail

    def _window(self, text: str) -> str:
        """A window's written form: the grammar on the text between the spans that keep our convention."""
        out, done = [], 0
        for span in sorted([*_KEPT.finditer(text), *_NTH_OF_MONTH.finditer(text)], key=lambda m: m.start()):
            if span.start() < done:
                continue  # inside a span already kept ("the fourth of July" is both)
            out += [self._grammar_on(text[done:span.start()]), _kept(span)]
            done = span.end()
        return "".join(out + [self._grammar_on(text[done:])])

    def __call__(self, text: str) -> str:
        text = _YEAR.sub(_year, _COMMA_IN_NUMBER.sub(r"\1", _AM_PM.sub(r"\1 m", text)))
        words = text.split(" ")
        windows: list[list[int]] = []  # [first, end) word ranges around number words, merged where they touch
        for i, word in enumerate(words):
            if word.strip(".,;:!?\"'()").lower() in NUMBER_WORDS:
                first, end = max(0, i - WINDOW), min(len(words), i + WINDOW + 1)
                if windows and first <= windows[-1][1]:
                    windows[-1][1] = end
                else:
                    windows.append([first, end])
        out, done = [], 0
        for first, end in windows:
            out += words[done:first] + [self._window(" ".join(words[first:end]))]
            done = end
        return " ".join(out + words[done:])


def _year(match: re.Match) -> str:
    """A year said in pairs in figures ("fourteen sixty five" -> "1465"), unless number words or units come
    right before or after it (then it is part of another number: the grammar reads it)."""
    before = match.string[:match.start()].split()
    after = match.string[match.end():].split()
    if any(words and words[k].strip(".,;:!?\"'()").lower() in _NOT_AROUND_A_YEAR
           for words, k in ((before, -1), (after, 0))):
        return match.group(0)
    century, oh, hundred, tens, ones, teen = match.groups()
    tail = (_DIGITS.index(oh.lower()) + 1 if oh else 0 if hundred else
            10 + _TEENS.index(teen.lower()) if teen else
            20 + 10 * _TENS.index(tens.lower()) + (_DIGITS.index(ones.lower()) + 1 if ones else 0))
    return str((13 + _TEENS[3:].index(century.lower())) * 100 + tail)


def _kept(span: re.Match) -> str:
    """A kept span as written: "the fifth of March" -> "the 5th of March"; idioms and clock phrases as said."""
    if span.re is not _NTH_OF_MONTH:
        return span.group(0)
    day = _ORDINAL_VALUES[span.group(1).lower()]
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"the {day}{suffix} of {span.group(2)}"


def available() -> bool:
    """Whether the written form can be made here (damga installed: wheels for Python 3.11 and later)."""
    from asr.model.errors import installed
    return installed("damga")
