"""CTC decoding: greedy best path, incremental across chunks, with token and word times."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from asr.text.tokenizer import BLANK, Tokenizer


@dataclass
class Token:
    id: int
    frame: int  # encoder frame where the token was first emitted
    word: str | None = None  # a phone model's lexicon search: the word this token ends


@dataclass
class Word:
    word: str
    start: float  # seconds
    end: float
    confidence: float | None = None  # in [0, 1] from the CTC posteriors of its frames (None: not computed)


def greedy_tokens(logprobs: np.ndarray, previous: int = BLANK, offset: int = 0) -> tuple[list[Token], int]:
    """Best-path CTC over (T, V): collapse repeats, drop blanks.

    `previous` is the last frame's best id from the preceding chunk, so a token that spans a
    chunk boundary is emitted once; returns the new tokens and the last frame's best id.
    """
    best = np.asarray(logprobs).argmax(axis=-1).tolist()
    tokens = []
    for t, token in enumerate(best):
        if token != BLANK and token != previous:
            tokens.append(Token(token, offset + t))
        previous = token
    return tokens, previous


class GreedySearch:
    """Best-path CTC, carried across chunks (a token spanning a chunk boundary is emitted once)."""

    def __init__(self, offset: int = 0):
        self.frames, self.previous, self.tokens = offset, BLANK, []

    def push(self, logprobs: np.ndarray) -> None:
        new, self.previous = greedy_tokens(logprobs, self.previous, self.frames)
        self.tokens.extend(new)
        self.frames += logprobs.shape[0]

    def best(self) -> list[Token]:
        return list(self.tokens)

    def final(self, mid: float = 0.0) -> list[Token]:  # no LM: where the segment stands changes nothing
        return list(self.tokens)

    def alternatives(self) -> list:
        return []  # one path: no competition

    def sentence_end(self) -> None:
        return None  # no word LM to judge whether the sentence can end


def greedy_decode(logprobs: np.ndarray) -> list[int]:
    """(T, V) -> token ids."""
    return [t.id for t in greedy_tokens(logprobs)[0]]


def word_json(word: Word) -> dict:
    """{"word", "start", "end"[, "confidence"]}: a word as every JSON output writes it."""
    out = {"word": word.word, "start": round(word.start, 3), "end": round(word.end, 3)}
    return out if word.confidence is None else {**out, "confidence": round(word.confidence, 3)}


def word_groups(tokens: list[Token], tokenizer: Tokenizer) -> list[tuple[str, list[Token]]]:
    """The words the tokens spell, each with its tokens (a word-start unit opens a new word). Phones spell no
    words: a phone model's words are the ones its lexicon search labelled tokens with, each with the tokens up
    to the one that ended it (the word boundary unit left out)."""
    if tokenizer.kind == "phone":
        found, group = [], []
        for token in tokens:
            if not tokenizer.word_starts[token.id]:
                group.append(token)
            if token.word is not None:
                found.append((token.word, group or [token]))
                group = []
        return found
    groups: list[list[Token]] = []
    pieces, starts = tokenizer.piece_texts, tokenizer.word_starts
    for token in tokens:
        if not groups or starts[token.id]:
            groups.append([])
        if pieces[token.id].strip():
            groups[-1].append(token)
    words = [(tokenizer.decode([t.id for t in group]).strip(), group) for group in groups]
    return [(text, group) for text, group in words if text]


def word_times(tokens: list[Token], tokenizer: Tokenizer, frame_seconds: float) -> list[Word]:
    """Group tokens into words; a word starts at its first token's frame and ends one frame
    after its last token (CTC spikes mark a token's position, not its full extent)."""
    return [Word(text, group[0].frame * frame_seconds, (group[-1].frame + 1) * frame_seconds)
            for text, group in word_groups(tokens, tokenizer)]
