"""CTC output units: SentencePiece BPE (default) or characters. Id 0 is always the CTC blank.

A tokenizer is stored with the model as bytes (`to_bytes` / `from_bytes`), never as a pickle.
"""
from __future__ import annotations

import io
import json
from functools import cached_property
from typing import Iterable

import sentencepiece as spm

BLANK = 0
_CHAR_UNITS = ["<blank>", "<unk>", "|", "'"] + [chr(c) for c in range(ord("A"), ord("Z") + 1)]


class Tokenizer:
    """Maps normalised text to CTC token ids (>= 1) and back."""

    def __init__(self, kind: str, sp_model: bytes | None = None):
        if kind not in ("bpe", "char"):
            raise ValueError(f"tokenizer kind={kind!r} must be 'bpe' or 'char'")
        self.kind = kind
        self.sp: spm.SentencePieceProcessor | None = None
        self._sp_bytes = sp_model
        if kind == "bpe":
            self.sp = spm.SentencePieceProcessor(model_proto=sp_model)

    @classmethod
    def train(cls, texts: Iterable[str], kind: str = "bpe", vocab_size: int = 256) -> "Tokenizer":
        """Learn the units from normalised training text."""
        if kind == "char":
            return cls("char")
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(list(texts)), model_writer=model, vocab_size=vocab_size, model_type="bpe",
            character_coverage=1.0, pad_id=BLANK, pad_piece="<blank>", unk_id=1, bos_id=-1, eos_id=-1,
            num_threads=1, minloglevel=2)
        return cls("bpe", model.getvalue())

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size() if self.sp else len(_CHAR_UNITS)

    def encode(self, text: str) -> list[int]:
        if self.sp:
            return self.sp.encode(text)
        index = {unit: i for i, unit in enumerate(_CHAR_UNITS)}
        return [index.get(ch, 1) for ch in text.replace(" ", "|")]

    def decode(self, ids: Iterable[int]) -> str:
        ids = [i for i in ids if i != BLANK]
        if self.sp:
            return self.sp.decode(ids)
        return " ".join("".join(_CHAR_UNITS[i] for i in ids if i > 1).replace("|", " ").split())

    def units(self) -> list[str]:
        """The name of every output unit, by id (id 0 is the blank)."""
        if self.sp:
            return [self.sp.id_to_piece(i) for i in range(self.vocab_size)]
        return list(_CHAR_UNITS)

    def word_separator(self) -> str | None:
        """The unit between words (characters), or None when units mark word starts themselves (BPE)."""
        return None if self.sp else "|"

    def spell(self, word: str) -> list[str]:
        """A normalised word as unit names, as CTC should emit it (letters end with the separator)."""
        if self.sp:
            return self.sp.encode(word, out_type=str)
        return [ch if ch in _CHAR_UNITS else "<unk>" for ch in word] + ["|"]

    def starts_word(self, token: int) -> bool:
        """True when `token` begins a new word (used for word timestamps)."""
        if self.sp:
            return self.sp.id_to_piece(token).startswith("\u2581")
        return _CHAR_UNITS[token] == "|"

    @cached_property
    def piece_texts(self) -> tuple[str, ...]:
        """Each unit's text as `decode([id])` gives it, by id (a table: word grouping looks up every token)."""
        return tuple(self.decode([i]) for i in range(self.vocab_size))

    @cached_property
    def word_starts(self) -> tuple[bool, ...]:
        """`starts_word(id)` for every id, as a table."""
        return tuple(self.starts_word(i) for i in range(self.vocab_size))

    def to_bytes(self) -> bytes:
        header = json.dumps({"kind": self.kind}).encode() + b"\n"
        return header + (self._sp_bytes or b"")

    @classmethod
    def from_bytes(cls, data: bytes) -> "Tokenizer":
        header, _, body = data.partition(b"\n")
        return cls(json.loads(header)["kind"], body or None)
