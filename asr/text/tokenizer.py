"""CTC output units: SentencePiece BPE (default), characters, or phones. Id 0 is always the CTC blank.

A tokenizer is stored with the model as bytes (`to_bytes` / `from_bytes`), never as a pickle.

Phones are the lexicon's 39 (`asr.text.lexicon.PHONES`), after the blank, <unk> and, with `word_boundary`, the
unit "|" that ends every word. A phone tokenizer spells words through a lexicon (`with_lexicon`: its first
pronunciation, the G2P's for a word it lacks) and needs one to encode text; its bytes hold the lexicon (gzipped
text), so a phone model's file spells words by itself. Decoded phone ids are the phones' names ("HH AH L OW W ER
L D"): no words; those come from the lexicon search (`asr.decoding.beam`).
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
from functools import cached_property
from typing import Iterable

import sentencepiece as spm

from asr.text.lexicon import PHONES, Lexicon

BLANK = 0
KINDS = ("bpe", "char", "phone")
_CHAR_UNITS = ["<blank>", "<unk>", "|", "'"] + [chr(c) for c in range(ord("A"), ord("Z") + 1)]


def phone_units(word_boundary: bool) -> list[str]:
    return ["<blank>", "<unk>"] + (["|"] if word_boundary else []) + list(PHONES)


class Tokenizer:
    """Maps normalised text to CTC token ids (>= 1) and back."""

    def __init__(self, kind: str, sp_model: bytes | None = None, word_boundary: bool = True):
        if kind not in KINDS:
            raise ValueError(f"tokenizer kind={kind!r} must be one of {', '.join(map(repr, KINDS))}")
        self.kind = kind
        self.sp: spm.SentencePieceProcessor | None = None
        self._sp_bytes = sp_model
        if kind == "bpe":
            self.sp = spm.SentencePieceProcessor(model_proto=sp_model)
        self.word_boundary = word_boundary if kind == "phone" else kind == "char"
        self._lexicon: Lexicon | None = None  # phones: how words are spelled (stored in the bytes)
        self._stored_lexicon: bytes | None = None  # its gzipped text, read on first use (`lexicon`)
        self._saved_lexicon: tuple[int, bytes] | None = None  # (the lexicon's revision, its gzipped text then)
        self._loaded_revision: int | None = None  # the lexicon's revision when read from the bytes
        self.fingerprint: str | None = None  # a digest of the bytes (and G2P) it was loaded from: what the word
        # search's lexicon cache is keyed on (`asr.decoding.lexicon_cache`); None for one made or changed in code
        self._units = phone_units(word_boundary) if kind == "phone" else _CHAR_UNITS

    @property
    def lexicon(self) -> Lexicon | None:
        """How a phone model spells words. A loaded model's is read from its bytes on first use: with the word
        search's lexicon cached (`asr.decoding.lexicon_cache`), only a hotword list needs it (262k words, 57 MB)."""
        if self._stored_lexicon is not None:
            from asr.text.g2p import bundled_g2p  # noqa: PLC0415 (phone models only)
            stored, self._stored_lexicon = self._stored_lexicon, None
            self._lexicon = Lexicon.from_text(gzip.decompress(stored).decode(), "the model's lexicon", bundled_g2p())
            self._loaded_revision = self._lexicon.revision
            self._saved_lexicon = (self._loaded_revision, stored)
        return self._lexicon

    def lexicon_as_loaded(self) -> bool:
        """Whether the lexicon is still what the bytes it was loaded from hold (unread, or read and unchanged since:
        no G2P words filled in), so that `fingerprint` speaks for it."""
        if self.fingerprint is None:
            return False
        return self._lexicon is None or self._lexicon.revision == self._loaded_revision  # None: still unread

    def with_lexicon(self, lexicon: Lexicon) -> "Tokenizer":
        """This tokenizer spelling words through `lexicon` (phones; other kinds ignore it). Returns self."""
        self._lexicon, self._stored_lexicon, self._saved_lexicon, self.fingerprint = lexicon, None, None, None
        return self

    @classmethod
    def train(cls, texts: Iterable[str], kind: str = "bpe", vocab_size: int = 256,
              word_boundary: bool = True) -> "Tokenizer":
        """Learn the units from normalised training text (characters and phones have fixed units)."""
        if kind in ("char", "phone"):
            return cls(kind, word_boundary=word_boundary)
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(list(texts)), model_writer=model, vocab_size=vocab_size, model_type="bpe",
            character_coverage=1.0, pad_id=BLANK, pad_piece="<blank>", unk_id=1, bos_id=-1, eos_id=-1,
            num_threads=1, minloglevel=2)
        return cls("bpe", model.getvalue())

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size() if self.sp else len(self._units)

    @cached_property
    def _index(self) -> dict[str, int]:
        return {unit: i for i, unit in enumerate(self._units)}

    def encode(self, text: str) -> list[int]:
        if self.sp:
            return self.sp.encode(text)
        if self.kind == "phone":
            return [i for spellings in self.word_spellings(text) for i in spellings[0]]
        return [self._index.get(ch, 1) for ch in text.replace(" ", "|")]

    def word_spellings(self, text: str) -> list[list[list[int]]]:
        """Phones: each word of normalised `text` -> its spellings as ids, one a pronunciation, the first the one
        `encode` uses (`spell`'s); the last word's without the boundary unit, as `encode` ends."""
        words = []
        for word in text.split():
            spellings = self.pronunciations(word) or [self.spell(word)]  # none: spell's <unk>
            words.append([[self._index[u] for u in units] for units in spellings])
        if self.word_boundary and words:
            words[-1] = [ids[:-1] for ids in words[-1]]
        return words

    def decode(self, ids: Iterable[int]) -> str:
        ids = [i for i in ids if i != BLANK]
        if self.sp:
            return self.sp.decode(ids)
        if self.kind == "phone":  # the phones' names: a phone model's words come from the lexicon search
            return " ".join(self._units[i] for i in ids if i > 1 and self._units[i] != "|")
        return " ".join("".join(_CHAR_UNITS[i] for i in ids if i > 1).replace("|", " ").split())

    def units(self) -> list[str]:
        """The name of every output unit, by id (id 0 is the blank)."""
        if self.sp:
            return [self.sp.id_to_piece(i) for i in range(self.vocab_size)]
        return list(self._units)

    def word_separator(self) -> str | None:
        """The unit that ends words (characters; phones with a word boundary), or None (BPE, phones without)."""
        return "|" if self.word_boundary else None

    def spell(self, word: str) -> list[str]:
        """A normalised word as unit names, as CTC should emit it (letters end with the separator). Phones:
        the word's first pronunciation (the lexicon's, else its G2P's; <unk> where neither has one)."""
        if self.sp:
            return self.sp.encode(word, out_type=str)
        if self.kind == "phone":
            spellings = self.pronunciations(word)
            return spellings[0] if spellings else ["<unk>"] + (["|"] if self.word_boundary else [])
        return [ch if ch in _CHAR_UNITS else "<unk>" for ch in word] + ["|"]

    def pronunciations(self, word: str) -> list[list[str]]:
        """Every spelling of a normalised word in units: characters and BPE have one (`spell`); phones one a
        pronunciation (then the boundary unit, if any), none where neither the lexicon nor its G2P has one."""
        if self.kind != "phone":
            return [self.spell(word)]
        if self.lexicon is None:
            raise ValueError("a phone tokenizer needs a lexicon to spell words (Tokenizer.with_lexicon)")
        return [list(p) + (["|"] if self.word_boundary else []) for p in self.lexicon.pronunciations(word)]

    def starts_word(self, token: int) -> bool:
        """True when `token` begins a new word (used for word timestamps)."""
        if self.sp:
            return self.sp.id_to_piece(token).startswith("\u2581")
        return self._units[token] == "|"

    @cached_property
    def piece_texts(self) -> tuple[str, ...]:
        """Each unit's text as `decode([id])` gives it, by id (a table: word grouping looks up every token)."""
        return tuple(self.decode([i]) for i in range(self.vocab_size))

    @cached_property
    def word_starts(self) -> tuple[bool, ...]:
        """`starts_word(id)` for every id, as a table."""
        return tuple(self.starts_word(i) for i in range(self.vocab_size))

    def to_bytes(self) -> bytes:
        """A JSON header line, then the SentencePiece model (BPE) or the lexicon's text, gzipped (phones)."""
        if self.kind != "phone":
            return json.dumps({"kind": self.kind}).encode() + b"\n" + (self._sp_bytes or b"")
        header = json.dumps({"kind": self.kind, "word_boundary": self.word_boundary}).encode() + b"\n"
        return header + self._gzipped_lexicon()

    def _gzipped_lexicon(self) -> bytes:
        """The lexicon's text, gzipped: the bytes it was loaded from while it is unread or unchanged, else made again
        (260k words: seconds) and kept until it changes (a training run saves its model many times)."""
        if self._stored_lexicon is not None:
            return self._stored_lexicon
        lexicon = self.lexicon
        if not lexicon:
            return b""
        if self._saved_lexicon is None or self._saved_lexicon[0] != lexicon.revision:  # `with_lexicon` clears it
            self._saved_lexicon = (lexicon.revision, gzip.compress(lexicon.to_text().encode(), mtime=0))
        return self._saved_lexicon[1]

    @classmethod
    def from_bytes(cls, data: bytes) -> "Tokenizer":
        """The tokenizer `to_bytes` wrote. A phone tokenizer gets its lexicon back, with the bundled G2P (where this
        installation has one) for words outside it."""
        header, _, body = data.partition(b"\n")
        fields = json.loads(header)
        digest = hashlib.blake2b(data, digest_size=16)
        if fields["kind"] != "phone":
            tokenizer = cls(fields["kind"], body or None)
        else:
            tokenizer = cls("phone", word_boundary=fields.get("word_boundary", True))
            if body:
                from asr.pretrained import bundled  # noqa: PLC0415 (phone models only)
                from asr.text.g2p import FILE  # noqa: PLC0415
                tokenizer._stored_lexicon = body  # read on first use (`lexicon`)
                g2p = bundled(FILE)  # it spells the words the lexicon lacks
                digest.update(g2p.read_bytes() if g2p else b"no G2P")
        tokenizer.fingerprint = digest.hexdigest()
        return tokenizer
