"""The second pass: a larger word LM re-ranks a final's n-best list.

The first pass (`asr.decoding.beam`) searches with a pruned trigram that is cheap to query at every frame. When a
segment ends, its beam holds the final hypotheses; each carries the acoustic score and the first-pass LM score
that flashlight kept apart, so the list can be ranked again with one more feature, the larger LM's score of the
words:

    score = acoustic + first_weight * first-pass LM + weight * second LM + word_score * words

With `first_weight` the search's LM weight, `weight` 0 and `word_score` the search's, this is the search's own
score (a test holds it to that), so the second pass changes a final only where the larger LM disagrees. Partials
stay first-pass: a final is decided once, at its endpoint, and the list is short (`RescoreConfig.nbest`).

    rescorer = Rescorer.shared(word_lm.words, RescoreConfig("lm4.klm", ...))   # over the first pass's word labels
    search = word_lm.search(rescorer=rescorer)                                # its final: the best after ranking
    ranked = rescorer.rank(hypotheses)                                        # [(score, hypothesis)], best first
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flashlight.lib.text.dictionary import Dictionary

from asr.decoding.lm_binary import open_kenlm


@dataclass(frozen=True)
class RescoreConfig:
    """The second pass's LM and weights; the weights are tuned with the first pass's on a held-out speaker
    (`asr.training.tune_lm --rescore`)."""

    lm: str | None = "bundled"  # the larger LM (ARPA, or KenLM's binary); "bundled": the one shipped beside the
    # bundled word LM, where the first pass searches with that LM and the package ships one (Decoder.load); None: none
    weight: float = 1.0  # the larger LM's weight
    first_weight: float = 1.0  # the first pass's LM's weight in the new score
    word_score: float = -1.0  # per word, in the new score
    nbest: int = 64  # final hypotheses ranked again (the beam's best first)

    def validate(self) -> "RescoreConfig":
        if self.nbest < 1:
            raise ValueError(f"the n-best list needs at least one hypothesis (got {self.nbest})")
        if self.lm not in (None, "bundled") and not Path(self.lm).is_file():
            raise FileNotFoundError(f"{self.lm}: no such language model file")
        return self


class Rescorer:
    """A larger word LM over the first pass's word labels (`words`, its Dictionary: label i is the same word in
    both), loaded on the first final it ranks, so a process that never finishes a segment never pays for it."""

    def __init__(self, words: Dictionary, cfg: RescoreConfig):
        self.words, self.cfg = words, cfg.validate()
        self.unk = words.get_index("<unk>")
        self._lm = None  # flashlight's KenLM, once loaded

    @property
    def lm(self):
        if self._lm is None:
            self._lm = open_kenlm(Path(self.cfg.lm), self.words)
        return self._lm

    @classmethod
    def shared(cls, words: Dictionary, cfg: RescoreConfig) -> "Rescorer":
        """The Rescorer of these labels and settings, made once per process (a server's sessions share it)."""
        key = (words, cfg)  # the Dictionary itself (compared by identity), kept alive with its Rescorer
        if key not in _SHARED:
            _SHARED[key] = cls(words, cfg)
            while len(_SHARED) > 2:
                _SHARED.pop(next(iter(_SHARED)))
        return _SHARED[key]

    def lm_score(self, labels: list[int]) -> float:
        """The larger LM's score of a word sequence (labels of `words`; one past <unk>, a hotword the lexicon
        lacks, counts as <unk>), from the sentence start to its end, in the first pass's units."""
        lm = self.lm
        state, total = lm.start(False), 0.0
        for label in labels:
            state, score = lm.score(state, min(label, self.unk))
            total += score
        return total + lm.finish(state)[1]

    def rank(self, hypotheses: list) -> list[tuple[float, object]]:
        """flashlight's final hypotheses (best first) -> the first `nbest` as (new score, hypothesis), best first
        (ties keep the beam's order). A word sequence met twice (two alignments) is looked up in the LM once."""
        cfg, second = self.cfg, {}
        ranked = []
        for hyp in hypotheses[: cfg.nbest]:
            labels = tuple(label for label in hyp.words if label >= 0)
            if labels not in second:
                second[labels] = self.lm_score(list(labels))
            ranked.append((hyp.emittingModelScore + cfg.first_weight * hyp.lmScore + cfg.weight * second[labels]
                           + cfg.word_score * len(labels), hyp))
        ranked.sort(key=lambda pair: -pair[0])
        return ranked


_SHARED: dict[tuple, Rescorer] = {}  # Rescorer.shared's: insertion order, oldest first
