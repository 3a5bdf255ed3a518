"""Simulated recognition output for training the restorer: word errors and the pauses between words.

`Confusions` finds, for a word, words that look or sound alike (one letter deleted from each gives
the same string, or the same consonant skeleton: THEIR / THERE, WEIGHING / WHEN ...). `corrupt` makes a
noisy copy of a labelled sentence: words deleted (function words more often), substituted by a
confusable word, occasionally a short word inserted; its labels are carried as `asr.text.restore.align`
carries them onto real recognizer output. `Pauses` samples the pause before each word from empirical
distributions that depend on the mark before it (none, comma, sentence end), estimated from the
recognizer's output of training audio (recipes/restorer/asr_outputs.py), with a per-item tempo.
Everything draws from the `random.Random` it is given, so a seed fixes the result.
"""
from __future__ import annotations

import random
import re
from collections import defaultdict
from dataclasses import dataclass

from asr.text.restore.align import Pair, carry, strength
from asr.text.restore.labels import Labelled

FUNCTION = frozenset("A AN THE OF TO IN ON AT AND OR BUT IS ARE WAS WERE BE BEEN IT HE SHE WE THEY I YOU HIS HER "
                     "THEIR ITS THAT THIS FOR WITH AS BY FROM HAD HAS HAVE DO DID NOT SO IF THEN THAN".split())
INSERTED = ("A", "THE", "AND", "OF", "IN", "IT", "TO", "IS", "HE", "THAT", "I", "ON", "AN")
_VOWELS = re.compile(r"(?<=.)[AEIOUY']+")


def skeleton(word: str) -> str:
    """A cheap sound key: the first letter, then the consonants, doubled letters once (THERE -> THR)."""
    key = _VOWELS.sub("", word.replace("PH", "F").replace("CK", "K").replace("C", "K"))
    return re.sub(r"(.)\1+", r"\1", key)


class Confusions:
    """Words that look or sound like a word, among a vocabulary (the most frequent training words)."""

    def __init__(self, vocab: list[str]):
        self.vocab = [w for w in vocab if w.replace("'", "").isalpha()]
        by_key: dict[str, list[str]] = defaultdict(list)
        for word in self.vocab:
            for key in self._keys(word):
                by_key[key].append(word)
        self.by_key = by_key

    @staticmethod
    def _keys(word: str) -> set[str]:
        return {"~" + skeleton(word)} | ({word[:i] + word[i + 1:] for i in range(len(word))} if len(word) > 2 else set())

    def like(self, word: str) -> list[str]:
        """Words confusable with `word` (not itself), sorted; [] when none."""
        return sorted({w for key in self._keys(word) for w in self.by_key.get(key, ()) if w != word})

    def substitute(self, word: str, rng: random.Random) -> str:
        """A confusable word, or a random vocabulary word when `word` has none."""
        options = self.like(word)
        return rng.choice(options) if options else rng.choice(self.vocab)


@dataclass
class NoiseConfig:
    max_error_rate: float = 0.3  # each item's word error rate is drawn uniformly in [0, max]
    deletion: float = 0.3  # shares of the errors (substitutions: the rest)
    insertion: float = 0.1
    function_bias: float = 2.0  # a function word is this many times as likely to be deleted


def corrupt(item: Labelled, confusions: Confusions, rng: random.Random, cfg: NoiseConfig = NoiseConfig()) -> Labelled:
    """A noisy copy of `item` as a recognizer might output it, with labels carried onto its words."""
    rate = rng.uniform(0, cfg.max_error_rate)
    hyp: list[str] = []
    pairs: list[Pair] = []
    for r, word in enumerate(item.words):
        draw = rng.random()
        deletion = rate * cfg.deletion * (cfg.function_bias if word in FUNCTION else 1.0)
        if draw < deletion and len(item.words) > 1:
            pairs.append((r, None))
        elif draw < deletion + rate * (1 - cfg.deletion - cfg.insertion):
            pairs.append((r, len(hyp)))
            hyp.append(confusions.substitute(word, rng))
        else:
            pairs.append((r, len(hyp)))
            hyp.append(word)
        if rng.random() < rate * cfg.insertion:
            pairs.append((None, len(hyp)))
            hyp.append(rng.choice(INSERTED))
    if not hyp:
        return item
    return Labelled(hyp, *carry(item, len(hyp), pairs))


def mark_class(mark: int) -> int:
    """0: no mark before the word, 1: a comma, 2: a sentence end."""
    return strength(mark)


class Pauses:
    """Pauses (seconds) before words, drawn from the empirical distribution of each mark class."""

    def __init__(self, samples: dict[int, list[float]], tempo: float = 0.3):
        self.tempo = tempo  # sigma of each item's log tempo factor
        fallback = {0: [0.08], 1: [0.3], 2: [0.5]}
        self.samples = {c: sorted(samples.get(c) or fallback[c]) for c in (0, 1, 2)}

    @classmethod
    def estimate(cls, items: list[tuple[Labelled, list[float]]], tempo: float = 0.3) -> "Pauses":
        """From labelled recognizer output with real pauses (pauses[i]: before word i; the first is ignored)."""
        samples: dict[int, list[float]] = {0: [], 1: [], 2: []}
        for item, pauses in items:
            for i in range(1, len(item.words)):
                samples[mark_class(item.marks[i - 1])].append(pauses[i])
        return cls(samples, tempo)

    def quantile(self, cls_: int, q: float) -> float:
        values = self.samples[cls_]
        return values[min(len(values) - 1, int(q * len(values)))]

    def draw(self, marks: list[int], rng: random.Random) -> list[float]:
        """A pause before each word of an item whose words carry `marks` (the first: 0.0, unused)."""
        tempo = rng.lognormvariate(0.0, self.tempo)
        return [0.0] + [max(0.0, self.quantile(mark_class(m), rng.random()) * tempo) for m in marks[:-1]]

    def summary(self) -> dict[str, list[float]]:
        """Each class's 10th, 50th and 90th percentile (seconds)."""
        names = {0: "none", 1: "comma", 2: "sentence_end"}
        return {names[c]: [round(self.quantile(c, q), 3) for q in (0.1, 0.5, 0.9)] for c in (0, 1, 2)}
