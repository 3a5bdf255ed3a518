"""The one pronunciation lexicon: normalised words -> their pronunciations in 39 ARPAbet phones.

A lexicon file is plain text, one pronunciation a line, a word on several lines where it has several
(the first is the word's usual one):

    READ R EH D
    READ R IY D
    TOMATO T AH M EY T OW

Words are in the form `asr.text.normalize.normalize` gives (upper case, apostrophes); phones carry no stress
marks. `python -m asr.training.g2p.lexicon` builds one from CMUdict; words outside it are spelled by the G2P
(`asr.text.g2p`), which a `Lexicon` consults when it is given one. Torch-free.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

if TYPE_CHECKING:
    from asr.text.g2p import G2P

# CMUdict's phone set without stress: 15 vowels, then 24 consonants.
PHONES = ("AA AE AH AO AW AY EH ER EY IH IY OW OY UH UW "
          "B CH D DH F G HH JH K L M N NG P R S SH T TH V W Y Z ZH").split()
_CODE = {phone: i for i, phone in enumerate(PHONES)}  # a phone's byte in a stored pronunciation
_SEP = b"\xff"  # between a word's stored pronunciations


def _encode(pron: tuple[str, ...]) -> bytes:
    return bytes(map(_CODE.__getitem__, pron))


def _decode(stored: bytes) -> list[tuple[str, ...]]:
    return [tuple(PHONES[i] for i in code) for code in stored.split(_SEP)]


class LexiconError(ValueError):
    """A lexicon file that cannot be used; the message names the file and the line."""


def strip_stress(phone: str) -> str:
    """'AH0' -> 'AH' (CMUdict marks a vowel's stress with a trailing digit)."""
    return phone.rstrip("012")


class Lexicon:
    """Pronunciations by word, in file order; `g2p` (optional) spells words the lexicon lacks.

    A word's pronunciations are stored as one bytes object (a byte a phone, 0xff between pronunciations) and made
    into tuples of phone names on access: 260k words as lists of tuples took 105 MB, as bytes 35."""

    def __init__(self, entries: dict[str, list[tuple[str, ...]]] | None = None, g2p: "G2P | None" = None):
        self._stored: dict[str, bytes] = {}
        self.revision = 0  # bumped at every change of the words or their order (what a saved copy is checked by)
        self.g2p = g2p
        self.guessed: dict[str, list[tuple[str, ...]]] = {}  # the G2P's answers so far (each word run once)
        for word, prons in (entries or {}).items():
            for pron in prons:
                self.add(word, pron)

    def add(self, word: str, pron: Iterable[str]) -> None:
        """Add a pronunciation (kept once, after the word's earlier ones)."""
        pron = tuple(pron)
        try:
            code = _encode(pron)
        except KeyError:
            code = b""
        if not code or not word or " " in word:
            raise ValueError(f"bad lexicon entry {word!r}: {' '.join(pron) or 'no phones'}")
        stored = self._stored.get(word)
        if stored is None:
            self._stored[word] = code
        elif code not in stored.split(_SEP):
            self._stored[word] = stored + _SEP + code
        else:
            return
        self.revision += 1

    def __contains__(self, word: str) -> bool:
        return word in self._stored

    def __len__(self) -> int:
        return len(self._stored)

    def words(self) -> list[str]:
        """Every word of the lexicon, in the order first added."""
        return list(self._stored)

    def items(self) -> Iterator[tuple[str, list[tuple[str, ...]]]]:
        """(word, its pronunciations) for every word, in the order first added."""
        for word, stored in self._stored.items():
            yield word, _decode(stored)

    def pronunciations(self, word: str) -> list[tuple[str, ...]]:
        """Every pronunciation of a normalised word: the lexicon's, else the G2P's one, else none."""
        if (stored := self._stored.get(word)) is not None:
            return _decode(stored)
        if self.g2p is None:
            return []
        if word not in self.guessed:
            pron = tuple(self.g2p.phones(word))
            self.guessed[word] = [pron] if pron else []
        return self.guessed[word]

    def pronounce(self, word: str) -> tuple[str, ...]:
        """The usual pronunciation of a word (the first), () where there is none."""
        prons = self.pronunciations(word)
        return prons[0] if prons else ()

    def fill(self, words: Iterable[str], batch: int = 256) -> int:
        """Add the G2P's pronunciation of every word the lexicon lacks (batched); returns how many were added."""
        missing = sorted({w for w in words if w and w not in self._stored}, key=lambda w: (len(w), w))  # little padding
        if not missing or self.g2p is None:
            return 0
        added = 0
        for start in range(0, len(missing), batch):
            chunk = missing[start:start + batch]
            for word, pron in zip(chunk, self.g2p.phones_batch(chunk)):
                if pron:
                    self.add(word, pron)
                    added += 1
        return added

    def put_first(self, words: Iterable[str]) -> None:
        """Reorder the words: `words` that the lexicon has first, in their order, then the others as they were."""
        first = {word: self._stored[word] for word in words if word in self._stored}
        self._stored = first | {word: stored for word, stored in self._stored.items() if word not in first}
        self.revision += 1

    def to_text(self) -> str:
        return "".join(f"{word} {' '.join(pron)}\n" for word, prons in self.items() for pron in prons)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_text(), encoding="utf-8")
        return path

    @classmethod
    def from_text(cls, text: str, source: str = "lexicon", g2p: "G2P | None" = None) -> "Lexicon":
        """A lexicon from its file's text; LexiconError naming `source` and the line of a bad entry."""
        lexicon = cls(g2p=g2p)
        for number, line in enumerate(io.StringIO(text), start=1):
            fields = line.split()
            if fields:
                try:
                    lexicon.add(fields[0], fields[1:])
                except ValueError as err:
                    raise LexiconError(f"{source}: line {number}: {err}") from None
        return lexicon

    @classmethod
    def load(cls, path: str | Path, g2p: "G2P | None" = None) -> "Lexicon":
        """A lexicon file (see the module doc); LexiconError naming the file and line of a bad entry."""
        path = Path(path)
        if not path.is_file():
            raise LexiconError(f"{path}: no such lexicon file")
        try:
            return cls.from_text(path.read_text(encoding="utf-8"), str(path), g2p)
        except UnicodeDecodeError:
            raise LexiconError(f"{path}: not a lexicon (not UTF-8 text)") from None
