"""How likely the word LM finds it that the sentence ends where a beam search stands: the endpointer's judge.

The answer is log10 P(</s> | the best hypothesis's words, after the stream's words before them) by the search's word
LM (`asr.decoding.endpoint_rules` compares it with `EndpointConfig.sentence_end_logprob`). flashlight reports a
hypothesis's words up to its last finished one, and in a lexicon of a character or phone model a word finishes only
with the separator after it, which the model is trained to put between words: after a sentence's last word it never
comes (`BeamSearch.final` feeds one). So the frames after the best hypothesis's finished words are searched again on
their own: a small search of the same lexicon and LM over them, the separator fed after them and ended, gives the
words they spell, and the LM scores the end of a sentence after the finished words and those. Where they spell none
(the speaker is mid-word), the sentence cannot end there: -inf. It costs a search of the last word's frames at a
small beam, once a pause.
"""
from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np
from flashlight.lib.text.decoder import CriterionType, LexiconDecoder, LexiconDecoderOptions

from asr.decoding.ctc import GreedySearch
from asr.text.tokenizer import BLANK


class Searching(Protocol):
    """What is read of a segment's search (`asr.decoding.beam.BeamSearch`, which imports this module)."""

    lm: Any  # its WordLM: the KenLM model, the lexicon's units and settings
    before: tuple[int, ...]  # the word labels its stream said before the segment
    offset: int  # the segment's first frame
    frames: int  # frames pushed
    decoder: Any  # flashlight's LexiconDecoder
    greedy: GreedySearch  # the greedy tokens of the frames pushed
    heard: list[np.ndarray]  # the frames pushed
    trie: Any  # the lexicon trie it searches
    word_lm: Any  # the LM it scores with (KenLM, or its hotword list's)

BEAM = 32  # hypotheses the search of the last word's frames keeps: a word or two, from one start


def sentence_end(search: Searching) -> float:
    """log10 P(</s> | `search`'s best hypothesis so far), its unfinished last word counted as the words its frames
    spell; -inf where they spell none. The search has a word LM (`search.lm.path`)."""
    lm = search.lm
    ken, unk = lm.lm, lm.unk
    state = ken.start(False)
    for label in search.before:  # the sentence may have begun in the finals before
        state, _ = ken.score(state, min(label, unk))
    done = 0  # frames up to the end of the last finished word
    if search.frames:
        for step, label in enumerate(search.decoder.get_best_hypothesis().words):
            if label >= 0:  # a word finished at this step (the path's steps: a boundary, then one a frame)
                state, _ = ken.score(state, min(label, unk))
                done = step
    if any(t.frame >= search.offset + done and t.id != lm.silence for t in search.greedy.tokens):
        words = spelled(search, done)
        if words is None:
            return -math.inf
        for label in words:
            state, _ = ken.score(state, min(label, unk))
    return float(ken.finish(state)[1])


def spelled(search: Searching, done: int) -> list[int] | None:
    """The word labels that `search`'s frames from `done` on spell, ended as a segment's last word is (None: no
    hypothesis ends on a whole word but along a path `beam_threshold` less likely than the frames' best)."""
    lm, cfg = search.lm, search.lm.cfg
    frames = np.ascontiguousarray(np.concatenate(search.heard)[done:])
    options = LexiconDecoderOptions(
        beam_size=BEAM, beam_size_token=lm.options.beam_size_token, beam_threshold=cfg.beam_threshold,
        lm_weight=cfg.lm_weight, word_score=cfg.word_score, unk_score=float("-inf"), sil_score=0.0, log_add=False,
        criterion_type=CriterionType.CTC)
    decoder = LexiconDecoder(options, search.trie, search.word_lm, lm.silence, BLANK, lm.unk, [], False)
    decoder.decode_begin()
    decoder.decode_step(frames.ctypes.data, frames.shape[0], frames.shape[1])
    if lm.end_frame is not None:
        decoder.decode_step(lm.end_frame.ctypes.data, 1, lm.end_frame.shape[1])
    decoder.decode_end()
    hypotheses = decoder.get_all_final_hypothesis()
    if not hypotheses:
        return None
    best = max(hypotheses, key=lambda h: h.score)
    if best.emittingModelScore < frames.max(axis=1).sum() - cfg.beam_threshold:
        return None  # the frames spell no word: only a path far less likely than the best one ends on one
    return [label for label in best.words if label >= 0]
