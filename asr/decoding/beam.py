"""CTC beam search with a lexicon and a word n-gram LM (torchaudio's flashlight decoder).

The lexicon is every word of the ARPA model spelled in the model's own units (BPE pieces, or
letters followed by the word separator), so the search only ever outputs words the LM knows.
A character model is trained to put the separator only *between* words, so the search appends one
frame in which the separator is certain: without it no hypothesis could finish its last word, and the
best finished one would often be the one that left that word out.

    search = BeamSearch(tokenizer, "lm.arpa")
    text = search(logprobs)            # (T, V) log-probs of one utterance -> text
    tokens = search.tokens(logprobs)   # the same hypothesis as CTC tokens with their frames
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from asr.decoding.ctc import Token
from asr.tools.lm import BOS, EOS, UNK
from asr.tokenizer import Tokenizer


_IMPOSSIBLE = -1.0e4  # a log-probability no path survives (flashlight wants finite scores)


@dataclass
class BeamConfig:
    beam_size: int = 128  # chosen on dev: 32 -> 128 lowered WER by 0.6-1.5 points, at about 25 ms per utterance (1 thread)
    lm_weight: float = 2.0  # both tuned on speechocean762 dev for the bundled model and LM (python -m asr.tools.tune_lm)
    word_score: float = 0.0


def arpa_words(arpa: Path) -> list[str]:
    """The unigram words of an ARPA file, without <s>, </s> and <unk>."""
    words, in_unigrams = [], False
    with open(arpa, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("\\"):
                if in_unigrams:
                    break
                in_unigrams = line == "\\1-grams:"
            elif in_unigrams and line:
                word = line.split("\t")[1] if "\t" in line else line.split()[1]
                if word not in (BOS, EOS, UNK):
                    words.append(word)
    return words


@contextlib.contextmanager
def _quiet_stderr():
    """Silence file descriptor 2 (C++ libraries write to it directly)."""
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


class BeamSearch:
    def __init__(self, tokenizer: Tokenizer, arpa: str | Path, cfg: BeamConfig = BeamConfig()):
        from torchaudio.models.decoder import ctc_decoder  # needs flashlight-text

        self.tokenizer = tokenizer
        arpa = Path(arpa)
        if not arpa.is_file():
            raise FileNotFoundError(f"{arpa}: no such language model file")
        tokens = tokenizer.units()
        separator = tokenizer.word_separator()
        # BPE marks word starts inside its pieces and has no separator unit: <unk> (never emitted) stands in.
        silence = separator or tokens[1]
        self.end_frame = None  # (1, V): the word separator, certain (character models only)
        if separator:
            self.end_frame = torch.full((1, len(tokens)), _IMPOSSIBLE)
            self.end_frame[0, tokens.index(separator)] = 0.0
        with tempfile.NamedTemporaryFile("w", suffix=".lexicon", encoding="utf-8", delete=False) as lexicon:
            for word in arpa_words(arpa):
                spelling = tokenizer.spell(word)
                if spelling:
                    lexicon.write(f"{word} {' '.join(spelling)}\n")
        try:
            with _quiet_stderr():  # KenLM draws a progress bar while it reads the ARPA file
                self.decoder = ctc_decoder(lexicon=lexicon.name, tokens=tokens, lm=str(arpa), nbest=1,
                                           beam_size=cfg.beam_size, lm_weight=cfg.lm_weight,
                                           word_score=cfg.word_score, blank_token=tokens[0], sil_token=silence,
                                           unk_word=UNK)
        finally:
            Path(lexicon.name).unlink()

    def _best(self, logprobs: Tensor):
        if logprobs.shape[0] == 0:
            return None
        logprobs = logprobs.float().cpu()
        if self.end_frame is not None:
            logprobs = torch.cat([logprobs, self.end_frame])
        hypotheses = self.decoder(logprobs[None].contiguous())[0]
        return hypotheses[0] if hypotheses else None

    def __call__(self, logprobs: Tensor) -> str:
        """(T, V) log-probs of one utterance -> the best hypothesis's text (decoded from its units,
        exactly as the segment finals of `tokens` are)."""
        return self.tokenizer.decode([token.id for token in self.tokens(logprobs)])

    def tokens(self, logprobs: Tensor, offset: int = 0) -> list[Token]:
        """(T, V) -> the best hypothesis as tokens (model ids) at their frames (+ `offset`), blanks
        and repeats removed, so `asr.decoding.ctc.word_times` gives its word times as for greedy output."""
        best = self._best(logprobs)
        if best is None:
            return []
        # flashlight's path has T + 2 steps: a word boundary before frame 0 and one after the last frame
        # (and the appended separator frame is clamped to the last real frame too)
        last = logprobs.shape[0] - 1
        return [Token(int(i), offset + min(max(int(t) - 1, 0), last))
                for i, t in zip(best.tokens.tolist(), best.timesteps.tolist())]
