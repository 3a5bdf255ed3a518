"""The one decoder every entry point uses: greedy CTC, or a beam search with a word LM.

It is chosen once (`Decoder.load`, from command-line options through `asr.cli`), and decodes
both ways the same: as incremental searches that are fed chunk by chunk (streaming partials
and segment finals), or over a whole utterance (`decode`, which is the same search fed once).

    decoder = Decoder.load(tokenizer)             # bundled word LM and its tuned weights
    search = decoder.search()
    search.push(logprobs)                          # (T, V), every chunk
    decoder.text(search.best())                    # the partial result so far
    decoder.text(search.final())                   # the result once the segment has ended
    decoder.with_hotwords(read_hotwords("names.txt", tokenizer))   # the same search, favouring the user's words
    decoder.restore("WHERE ARE YOU")               # a final as people read it ("Where are you?"), None when plain
"""
from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np

from asr.decoding.beam import BeamConfig, LMError, WordLM
from asr.decoding.biasing import Biasing
from asr.decoding.ctc import GreedySearch, Token, Word, word_times
from asr.decoding.hotwords import Hotword
from asr.pretrained import default_lm_path
from asr.restore.restorer import Restorer, bundled_restorer, load_restorer
from asr.tokenizer import Tokenizer


class Search(Protocol):
    def push(self, logprobs: np.ndarray) -> None:
        """Feed (T, V) log-probs of the next frames."""

    def best(self) -> list[Token]:
        """The best hypothesis so far (a partial result)."""

    def final(self) -> list[Token]:
        """The finished segment's result."""


class Decoder:
    """Greedy CTC (`lm=None`) or the lexicon beam search over `lm`; makes one search per segment.
    With a `restorer`, finals are also given as cased, punctuated text (`restore`)."""

    def __init__(self, tokenizer: Tokenizer, lm: WordLM | None = None, biasing: Biasing | None = None,
                 restorer: Restorer | None = None):
        self.tokenizer, self.lm, self.biasing, self.restorer = tokenizer, lm, biasing, restorer

    @classmethod
    def load(cls, tokenizer: Tokenizer, lm: str | Path | None = "bundled",
             cfg: BeamConfig = BeamConfig(), restorer: str | Restorer | None = "bundled") -> "Decoder":
        """lm: an ARPA file, "bundled" for the word LM shipped with the default model, or None (greedy).
        restorer: "bundled" (the casing and punctuation model shipped in the package, where there is one),
        a Restorer, or None (plain upper-case finals). Raises LMError for an unusable LM file (or when
        none is bundled), RestorerError for an unusable restorer."""
        if lm == "bundled":
            lm = default_lm_path()
            if lm is None:
                raise LMError("no word LM is bundled in this installation; give one with --lm PATH")
        if restorer == "bundled":
            restorer = load_restorer() if bundled_restorer() is not None else None
        return cls(tokenizer, WordLM(tokenizer, lm, cfg) if lm is not None else None, restorer=restorer)

    def with_hotwords(self, hotwords: list[Hotword]) -> "Decoder":
        """This decoder favouring `hotwords` (words outside the lexicon become possible outputs); the word
        LM is shared. ValueError for a greedy decoder: hotwords need the beam search."""
        if self.lm is None:
            raise ValueError("hotwords need the beam search with a word LM (not --greedy; with --model, add --beam or --lm)")
        return Decoder(self.tokenizer, self.lm, self.lm.biasing.get(hotwords), self.restorer)

    @property
    def kind(self) -> str:
        return "greedy" if self.lm is None else "beam"

    def search(self, offset: int = 0) -> Search:
        """A new search for a segment that starts at encoder frame `offset`."""
        return GreedySearch(offset) if self.lm is None else self.lm.search(offset, self.biasing)

    def decode(self, logprobs: np.ndarray, offset: int = 0) -> list[Token]:
        """A whole utterance's (T, V) log-probs -> its tokens: one search, fed once."""
        search = self.search(offset)
        search.push(logprobs)
        return search.final()

    def text(self, tokens: list[Token]) -> str:
        return self.tokenizer.decode([t.id for t in tokens])

    def restore(self, text: str) -> str | None:
        """A final's plain words as people read them (one token per word), or None without a restorer."""
        return None if self.restorer is None else self.restorer.restore(text)

    def words(self, tokens: list[Token], frame_seconds: float) -> list[Word]:
        return word_times(tokens, self.tokenizer, frame_seconds)
