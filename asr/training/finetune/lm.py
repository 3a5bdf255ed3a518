"""The fine-tuned model's word LM: an n-gram of the training split's text, linearly interpolated with the
starting model's LM (`asr.training.lm.mix`), so the data's words and phrasing join the search's lexicon and
everything the old LM knew stays.

The beam search's lexicon is the LM's most probable words (`BeamConfig.lexicon_words`, spelled in the
model's units: `asr.decoding.beam.WordLM`), so a word is only a possible output if the mixture ranks it
among those: `missing_from_lexicon` checks that every word of the training text made it.
"""
from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np

from asr.decoding import lexicon_cache, lm_binary
from asr.decoding.beam import BeamConfig, WordLM
from asr.text.tokenizer import Tokenizer
from asr.training.lm.build import build_arpa, read_sentences
from asr.training.lm.mix import interpolate, read_arpa, write_arpa
from asr.training.lm.tune import grid_search

DEFAULT_WEIGHT = 0.1  # the training text's share of the mixture when it is not tuned: on benchmarks/finetune/finetune.md's
# speaker (2026-12-02) 0.1 cost speechocean762 dev 0.4 beam points over the bundled LM and 0.2 cost 0.9, for the
# same gain on the speaker's own test split (26.09 and 26.20); 0.5 cost 0.6-0.9 more than 0.3
TUNE_WEIGHTS = (0.1, 0.3, 0.5, 0.7, 0.9)


def text_lm(train_manifest: Path, out: Path, order: int = 3) -> list[str]:
    """Write the `order`-gram model of the training split's normalised text to `out`; the sentences."""
    sentences = read_sentences(train_manifest)
    out.write_text(build_arpa(sentences, order), encoding="utf-8")
    return sentences


def binary_beside(arpa: Path) -> str:
    """Write `arpa`'s KenLM binary beside it (`asr.decoding.lm_binary`: the search then loads it at once); a line
    saying what was done."""
    if lm_binary.find_tool() is None:
        return (f"word LM: KenLM's build_binary is not installed (bash scripts/build_kenlm.sh), so {arpa.name} is "
                "parsed at each load (or converted into the cache on first use, once it is)")
    try:
        binary = lm_binary.write_binary(arpa)
    except (RuntimeError, OSError) as err:
        return f"word LM: no binary form ({err}); {arpa.name} is parsed at each load"
    return f"word LM: {binary.name}, its binary form ({binary.stat().st_size / 1e6:.1f} MB), loads at once"


def words_of(sentences: list[str]) -> list[str]:
    return sorted({word for sentence in sentences for word in sentence.split()})


def missing_from_lexicon(tokenizer: Tokenizer, arpa: Path, words: list[str], cfg: BeamConfig = BeamConfig()) -> list[str]:
    """The `words` that a beam search over `arpa` (with `cfg`'s lexicon size) can never output."""
    lexicon = WordLM(tokenizer, arpa, cfg).words
    return [word for word in words if not lexicon.contains(word)]


def tune_weight(logprobs: list[np.ndarray], refs: list[str], tokenizer: Tokenizer, text_arpa: Path, base_lm: Path,
                work: Path, weights: tuple[float, ...] = TUNE_WEIGHTS,
                cfg: BeamConfig = BeamConfig()) -> list[tuple[float, float]]:
    """(weight, beam WER %) for each mixture weight, decoding the held-out log-probs (T, V) each against its
    normalised reference; the acoustic model ran once. Each mixture is written under `work` in turn."""
    text, base = read_arpa(text_arpa), read_arpa(base_lm)
    rows = []
    for weight in weights:
        candidate = work / f"lm_{weight:g}.arpa"
        write_arpa(interpolate(text, base, weight), candidate)
        with contextlib.redirect_stdout(io.StringIO()):  # its own line names the beam's LM weight, not ours
            (_, _, words, _), = grid_search(logprobs, refs, tokenizer, str(candidate), [cfg.lm_weight],
                                             [cfg.word_score], cfg.beam_size)
        rows.append((weight, 100 * words.rate()))
        candidate.unlink()
        lm_binary.forget(candidate)  # its binary and lexicon, where the search cached them
        lexicon_cache.forget(candidate)
    return rows
