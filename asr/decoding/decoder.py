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

import dataclasses
import math
from pathlib import Path
from typing import Protocol

import numpy as np

from asr.decoding.beam import BeamConfig, LMError, WordLM
from asr.decoding.biasing import Biasing
from asr.decoding.confidence import Alternative, word_confidences
from asr.decoding.ctc import GreedySearch, Token, Word, word_times
from asr.decoding.hotwords import Hotword
from asr.decoding.rescore import RescoreConfig, Rescorer, paired_second_pass
from asr.pretrained import default_lm_path
from asr.text.restore.context import Context, final_labels
from asr.text.restore.labels import render
from asr.text.restore.restorer import Restorer, bundled_restorer, load_restorer
from asr.text.tokenizer import Tokenizer
from asr.text.written import WrittenForm
from asr.text.written import available as written_available


class Search(Protocol):
    def push(self, logprobs: np.ndarray) -> None:
        """Feed (T, V) log-probs of the next frames."""

    def best(self) -> list[Token]:
        """The best hypothesis so far (a partial result)."""

    def final(self, mid: float = 0.0) -> list[Token]:
        """The finished segment's result (`mid`: how likely the pause after it is inside a sentence; 0: it ends one)."""

    def alternatives(self) -> list[Alternative]:
        """After `final`: the competing final hypotheses as (score, tokens), best first ([] for greedy)."""

    def sentence_end(self) -> float | None:
        """log10 P(</s>) of the best hypothesis so far by the word LM (None: no word LM to judge)."""


def searches_words(tokenizer: Tokenizer, lm: object) -> bool:
    """Whether decoding with `lm` (None: no LM) is the word search: with an LM, and always for a phone model, whose
    phones spell no words (without an LM it searches its lexicon, every word alike)."""
    return lm is not None or tokenizer.kind == "phone"


class Decoder:
    """Greedy CTC (`lm=None`) or the lexicon beam search over `lm`; makes one search per segment.
    With a `restorer`, finals are also given as cased, punctuated text (`restore`), and with `written`,
    with their numbers, money, times and dates written as people write them."""

    def __init__(self, tokenizer: Tokenizer, lm: WordLM | None = None, biasing: Biasing | None = None,
                 restorer: Restorer | None = None, hotword_min_confidence: float = 0.0,
                 written: WrittenForm | None = None, spellings: dict[str, str] | None = None,
                 rescorer: Rescorer | None = None):
        self.tokenizer, self.lm, self.biasing, self.restorer = tokenizer, lm, biasing, restorer
        self.rescorer = rescorer  # the second pass over each final's n-best (asr.decoding.rescore), if any
        self.hotword_min_confidence = hotword_min_confidence  # a listed word below it: the final without the list
        self.written = written
        self.spellings = spellings or {}  # plain word -> the hotword list's casing of it ("PEMBERTON": "Pemberton")

    def _but(self, **changes) -> "Decoder":
        """This decoder with some of its parts changed (the word LM and restorer are shared)."""
        parts = dict(tokenizer=self.tokenizer, lm=self.lm, biasing=self.biasing, restorer=self.restorer,
                     hotword_min_confidence=self.hotword_min_confidence, written=self.written,
                     spellings=self.spellings, rescorer=self.rescorer)
        return Decoder(**{**parts, **changes})

    @classmethod
    def load(cls, tokenizer: Tokenizer, lm: str | Path | None = "bundled", cfg: BeamConfig = BeamConfig(),
             restorer: str | Restorer | None = "bundled", hotword_min_confidence: float = 0.0,
             written: bool = True, rescore: RescoreConfig = RescoreConfig(),
             model: str | Path | None = None) -> "Decoder":
        """lm: an ARPA file, "bundled" for the word LM shipped with the default model, or None (greedy; for a
        phone model, whose phones spell no words, a search of its lexicon without an LM).
        restorer: "bundled" (the casing and punctuation model shipped in the package, where there is one),
        a Restorer, or None (plain upper-case finals). Raises LMError for an unusable LM file (or when
        none is bundled), RestorerError for an unusable restorer. `hotword_min_confidence`: see `finish`.
        `written`: restored finals in the written form (`asr.text.written`) where it is installed. `rescore`: the
        second pass (`asr.decoding.rescore`); its LM "bundled" is the one that goes with `lm` for the acoustic
        `model` decoded (`paired_second_pass`: the bundled one after the bundled LM, a model folder's own after its
        own LM, else none)."""
        second = rescore.validate().lm
        if second == "bundled":
            second = paired_second_pass(lm, model)
        if lm == "bundled":
            lm = default_lm_path()
            if lm is None:
                raise LMError("no word LM is bundled in this installation; give one with --lm PATH")
        if restorer == "bundled":
            restorer = load_restorer() if bundled_restorer() is not None else None
        if not 0.0 <= hotword_min_confidence <= 1.0:
            raise ValueError(f"the hotwords' minimum confidence must be in [0, 1] (got {hotword_min_confidence})")
        word_lm = WordLM.shared(tokenizer, lm, cfg) if searches_words(tokenizer, lm) else None
        rescorer = None
        if word_lm is not None and word_lm.path is not None and second is not None:
            rescorer = Rescorer.shared(word_lm.words, dataclasses.replace(rescore, lm=str(second)))
        return cls(tokenizer, word_lm, restorer=restorer,
                   hotword_min_confidence=hotword_min_confidence,
                   written=WrittenForm() if written and restorer is not None and written_available() else None,
                   rescorer=rescorer)

    def with_hotwords(self, hotwords: list[Hotword]) -> "Decoder":
        """This decoder favouring `hotwords` (words outside the lexicon become possible outputs), their words
        spelled in restored finals as the list spells them where it gives them a capital; the word LM is
        shared, and so is `hotword_min_confidence` (see `finish`). ValueError for a greedy decoder: hotwords
        need the beam search."""
        if self.lm is None:
            raise ValueError("hotwords need the beam search with a word LM (not --greedy; with --model, add --beam or --lm)")
        spellings = {word: spelled for h in hotwords for word, spelled in zip(h.words, h.written) if spelled}
        return self._but(biasing=self.lm.biasing.get(hotwords), spellings=spellings)

    def spoken(self) -> "Decoder":
        """This decoder with restored finals in the spoken form: numbers as the words said."""
        return self._but(written=None)

    @property
    def kind(self) -> str:
        """greedy, beam (with the word LM), or lexicon (a phone model's search without an LM)."""
        return "greedy" if self.lm is None else "lexicon" if self.lm.path is None else "beam"

    def search(self, offset: int = 0, before: list[str] | tuple[str, ...] = ()) -> Search:
        """A new search for a segment that starts at encoder frame `offset`, after the words `before` it in its
        stream (the word LMs read the segment after them: `asr.decoding.rescore.Place`)."""
        if self.lm is None:
            return GreedySearch(offset)
        return self.lm.search(offset, self.biasing, self.rescorer, before)

    def decode(self, logprobs: np.ndarray, offset: int = 0) -> list[Token]:
        """A whole utterance's (T, V) log-probs -> its tokens: one search, fed once."""
        search = self.search(offset)
        search.push(logprobs)
        return search.final()

    def finish(self, search: Search, frame_seconds: float, logprobs: np.ndarray | None = None,
               offset: int = 0, before: list[str] | tuple[str, ...] = (),
               mid: float = 0.0) -> tuple[list[Token], list[Word]]:
        """A segment's final tokens and words, given its search (made after the words `before` it) and (for
        confidences) its (T, V) `logprobs` from frame `offset`; `mid`: how likely the pause after it is inside a
        sentence (0: it ends one, as at the stream's end). Where a listed hotword came out below
        `hotword_min_confidence`, the segment is decoded again without the list and that is the final: a hotword
        must be heard, not only favoured."""
        tokens = search.final(mid)
        words = self.words(tokens, frame_seconds, logprobs, offset, search.alternatives())
        if self.biasing is None or logprobs is None or not any(
                w.word in self.biasing.listed and w.confidence < self.hotword_min_confidence for w in words):
            return tokens, words
        unbiased = self._but(biasing=None)
        search = unbiased.search(offset, before)
        search.push(logprobs)
        tokens = search.final(mid)
        return tokens, unbiased.words(tokens, frame_seconds, logprobs, offset, search.alternatives())

    def text(self, tokens: list[Token]) -> str:
        if self.tokenizer.kind == "phone":  # the words the lexicon search labelled the phones with
            return " ".join(t.word for t in tokens if t.word)
        return self.tokenizer.decode([t.id for t in tokens])

    def restore(self, text: str, words: list[Word] | None = None, context: Context | None = None,
                after: float = math.inf) -> str | None:
        """A final's plain words as people read them, or None without a restorer: cased and punctuated (one
        token per word; the pause before each word, from `words`' times, helps place the marks; titles written
        "Mr.", "Dr."; a listed hotword spelled as its list spells it), and in the written form where that is on
        ("$25 at 3:30"). `context`: its stream's finals before it (`asr.text.restore.context`: read across the
        cut, and moved on past this final; None: a final on its own); `after`: the seconds of silence after it
        (math.inf: its stream ends there), which with the restorer's mark decide whether it ends a sentence."""
        if self.restorer is None:
            return None
        plain = text.split()
        times = [(w.start, w.end) for w in words] if words is not None and len(words) == len(plain) else None
        cased = render(plain, *final_labels(self.restorer, plain, times, context, after))
        restored = respelled(cased, text, self.spellings)
        return self.written(restored) if self.written else restored

    def words(self, tokens: list[Token], frame_seconds: float, logprobs: np.ndarray | None = None,
              offset: int = 0, alternatives: list[Alternative] | None = None) -> list[Word]:
        """The tokens' words with their times; with the segment's (T, V) `logprobs` (frames from `offset` on),
        also their confidences (`asr.decoding.confidence`), weighing the search's `alternatives` if any."""
        words = word_times(tokens, self.tokenizer, frame_seconds)
        if logprobs is not None:
            scores = word_confidences(tokens, self.tokenizer, logprobs, offset, alternatives or [])
            for word, score in zip(words, scores):
                word.confidence = score
        return words


def respelled(restored: str, plain: str, spellings: dict[str, str]) -> str:
    """A restored final (one token per plain word: the word cased, its mark attached) with each word found in
    `spellings` given that spelling, its mark kept."""
    tokens, words = restored.split(" "), plain.split()
    if not spellings or len(tokens) != len(words):
        return restored
    for i, word in enumerate(words):
        spelled = spellings.get(word)
        if spelled and tokens[i][:len(word)].upper() == word:
            tokens[i] = spelled + tokens[i][len(word):]
    return " ".join(tokens)
