"""Word confidences in [0, 1]: how sure the acoustic model and the search are of each word of a final.

- acoustic: the mean, over the word's units, of each unit's CTC posterior at its spike (the highest
  probability the model gives the unit from its first frame to the next unit's, at most SPAN frames);
- competition (the beam search only): the share of the search's final hypotheses, weighted by
  softmax(score / TEMPERATURE), that hold the same word starting within NEAR frames of it.

A word's confidence is competition^BEAM_WEIGHT * acoustic^(1 - BEAM_WEIGHT) with the beam search, the
acoustic one alone with greedy decoding. The constants were chosen on the first 150 speechocean762 dev
utterances (2026-11-27: AUC of telling right from wrong words 0.70 acoustic alone, 0.79 competition
alone, 0.80 both); `scripts/bench/confidence.py` measures the result on all of dev.
"""
from __future__ import annotations

import numpy as np

from asr.decoding.ctc import Token, word_groups
from asr.text.tokenizer import Tokenizer

SPAN = 4  # frames after a unit's first frame in which its CTC spike is looked for
TEMPERATURE = 2.0  # in the search's score units (natural log, LM-weighted)
NEAR = 2  # frames: a competing hypothesis's word this close to the word's start counts as the same word
BEAM_WEIGHT = 0.7

Alternative = tuple[float, list[Token]]  # a final hypothesis of the search: (score, tokens)


def token_confidences(tokens: list[Token], logprobs: np.ndarray, offset: int = 0) -> list[float]:
    """Each token's CTC posterior at its spike. `logprobs` (T, V) holds frames offset .. offset+T-1."""
    out = []
    for i, token in enumerate(tokens):
        stop = token.frame + SPAN
        if i + 1 < len(tokens):
            stop = max(min(stop, tokens[i + 1].frame), token.frame + 1)
        window = logprobs[max(token.frame - offset, 0):max(stop - offset, 0), token.id]
        out.append(float(np.exp(window.max())) if window.size else 0.0)
    return out


def competition(words: list[tuple[str, int]], alternatives: list[Alternative], tokenizer: Tokenizer) -> list[float]:
    """For each (word, first frame) of the best hypothesis, the weighted share of `alternatives` holding it."""
    scores = np.array([score for score, _ in alternatives], dtype=np.float64)
    weights = np.exp((scores - scores.max()) / TEMPERATURE)
    weights /= weights.sum()
    held = [[(text, group[0].frame) for text, group in word_groups(tokens, tokenizer)] for _, tokens in alternatives]
    return [float(sum(w for w, words_h in zip(weights, held)
                      if any(text == word and abs(frame - start) <= NEAR for text, frame in words_h)))
            for word, start in words]


def word_confidences(tokens: list[Token], tokenizer: Tokenizer, logprobs: np.ndarray, offset: int = 0,
                     alternatives: list[Alternative] | None = None) -> list[float]:
    """The confidence of each word that `tokens` spell (in `word_groups` order), from the segment's (T, V)
    `logprobs` (frames from `offset` on) and, where given, the search's competing final hypotheses."""
    per_token = dict(zip(map(id, tokens), token_confidences(tokens, logprobs, offset)))
    groups = word_groups(tokens, tokenizer)
    acoustic = [float(np.mean([per_token[id(t)] for t in group])) for _, group in groups]
    if not alternatives:
        return acoustic
    shared = competition([(text, group[0].frame) for text, group in groups], alternatives, tokenizer)
    return [c ** BEAM_WEIGHT * a ** (1 - BEAM_WEIGHT) for c, a in zip(shared, acoustic)]
