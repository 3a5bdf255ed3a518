"""The second pass: another word LM re-ranks a final's n-best list.

The first pass (`asr.decoding.beam`) searches with a pruned trigram that is cheap to query at every frame. When a
segment ends, its beam holds the final hypotheses; each carries the acoustic score and the first-pass LM score
that flashlight kept apart, so the list can be ranked again with one more feature, the second LM's score of the
words:

    score = acoustic + first_weight * first-pass LM + weight * second LM + word_score * words

The second LM is a larger n-gram (KenLM's ARPA or binary) or a neural word LM (`asr.decoding.neural_lm`, a
.safetensors file), which reads the whole list at once. A word outside the neural LM's vocabulary scores as its
<unk> plus the log of one over the first pass's words it lacks (<unk>'s share spread evenly over them).

With `first_weight` the search's LM weight, `weight` 0 and `word_score` the search's, this is the search's own
score (a test holds it to that), so the second pass changes a final only where the second LM disagrees. Partials
stay first-pass: a final is decided once, at its endpoint, and the list is short (`RescoreConfig.nbest`).

A segment of a stream is scored where it stands in it (`Place`): both LMs read its words after the words the stream's
finals said before it, as they would read them in the whole stream (the first pass searches from the sentence start:
its final list is scored again in place). At the stream's end its sentence ends; at a pause it may or may not, and
the LMs weigh both: the end's term is log(P(end) + mid x (1 - P(end))), `mid` being how likely such a pause is inside
a sentence against at its end (0: it ends the sentence, the LM's own end term; 1: the pause tells nothing, no term).

    rescorer = Rescorer.shared(word_lm.words, RescoreConfig("lm4.klm", ...))   # over the first pass's word labels
    search = word_lm.search(rescorer=rescorer)                                # its final: the best after ranking
    ranked = rescorer.rank(hypotheses)                                        # [(score, hypothesis)], best first
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from flashlight.lib.text.dictionary import Dictionary

from asr.decoding.lm_binary import open_kenlm
from asr.decoding.neural_lm import UNK, NeuralLM, is_neural_lm
from asr.model.folder import folder_lm, folder_rescore_lm
from asr.pretrained import default_rescore_lm_path


def paired_second_pass(lm: str | Path | None, model: str | Path | None = None) -> Path | None:
    """The second-pass LM that goes with a search of acoustic model `model` (None: the bundled one; a model folder;
    a file) with the first-pass word LM `lm` as the tools name it ("bundled": the bundled LM, what they search with
    unless told otherwise; a path; None: no search), where no second pass is asked for by name. The one place that
    pairs them, for every tool, `asr.finetune` and the benchmarks:

    - the bundled LM: the bundled second pass (`default.rescore.safetensors`, where the package ships one);
    - a model folder's own LM (`asr.model.folder`): the folder's `rescore.safetensors`, where it has one;
    - any other LM (one named with --lm, even the bundled file by its path), or none: no second pass.
    """
    if lm == "bundled":
        return default_rescore_lm_path()
    own = folder_rescore_lm(model)  # only beside the folder's own LM
    return own if own is not None and lm is not None and Path(lm) == folder_lm(model) else None


@dataclass(frozen=True)
class Place:
    """Where a segment stands in its stream: the word labels its stream's finals said before it (the LMs read its
    words after them), and how likely the pause after it is inside a sentence against at its end (0 at the stream's
    end, where the sentence ends)."""

    before: tuple[int, ...] = ()
    mid: float = 0.0

    @property
    def alone(self) -> bool:
        """A segment scored as a sentence of its own, as the search scored it."""
        return not self.before and self.mid == 0.0

    def end(self, logprob: float, base: float = math.e) -> float:
        """The end's term given the LM's log P(end) (in `base`): log(P(end) + mid x (1 - P(end)))."""
        if self.mid == 0.0:
            return logprob
        p = base ** logprob
        return math.log(p + self.mid * (1.0 - p), base)


def ngram_score(lm, unk: int, labels: list[int] | tuple[int, ...], place: Place = Place()) -> float:
    """flashlight's KenLM `lm`'s score (log10, as the search adds it) of a word sequence (labels; one past `unk`, a
    hotword the lexicon lacks, counts as `unk`) in `place`: read after the words before it, from the sentence start
    where there are none, its end's term as the place weighs it."""
    state, total = lm.start(False), 0.0
    for label in place.before:
        state, _ = lm.score(state, min(label, unk))
    for label in labels:
        state, score = lm.score(state, min(label, unk))
        total += score
    return total + place.end(lm.finish(state)[1], 10.0)


@dataclass(frozen=True)
class RescoreConfig:
    """The second pass's LM and weights; the weights are tuned with the first pass's on a held-out speaker
    (`asr.training.lm.tune --rescore`)."""

    lm: str | None = "bundled"  # the second LM (ARPA, KenLM's binary, or a neural LM's .safetensors); "bundled":
    # the one that goes with the first pass's LM (`paired_second_pass`: the bundled one after the bundled LM, a model
    # folder's own after its own LM, else none); None: none
    weight: float = 1.25  # the second LM's weight. The three tuned for the bundled model, LM and neural LM
    first_weight: float = 0.75  # (2026-12-07) on LibriSpeech speaker 8226's whole utterances, 64-best, the word
    word_score: float = -1.0  # score held at the search's: 9.81% WER -> 7.73 (1 / 1: 7.79; 0.75 / 2: 7.98)
    nbest: int = 64  # final hypotheses ranked again (the beam's best first)

    def validate(self) -> "RescoreConfig":
        if self.nbest < 1:
            raise ValueError(f"the n-best list needs at least one hypothesis (got {self.nbest})")
        if self.lm not in (None, "bundled") and not Path(self.lm).is_file():
            raise FileNotFoundError(f"{self.lm}: no such language model file")
        return self


class Rescorer:
    """A second word LM over the first pass's word labels (`words`, its Dictionary: label i is the same word in
    both), loaded on the first final it ranks, so a process that never finishes a segment never pays for it."""

    def __init__(self, words: Dictionary, cfg: RescoreConfig):
        self.words, self.cfg = words, cfg.validate()
        self.unk = words.get_index("<unk>")
        self._lm = None  # flashlight's KenLM or a NeuralLM, once loaded
        self._ids: dict[int, int] = {}  # first-pass label -> the neural LM's word id, as met

    @property
    def lm(self):
        if self._lm is None:
            path = Path(self.cfg.lm)
            self._lm = NeuralLM.load(path) if is_neural_lm(path) else open_kenlm(path, self.words)
        return self._lm

    def lm_scores(self, sequences: list[tuple[int, ...]], place: Place = Place()) -> list[float]:
        """The second LM's score of each word sequence (labels of `words`) in `place` (`ngram_score`)."""
        if not isinstance(self.lm, NeuralLM):
            return [ngram_score(self.lm, self.unk, labels, place) for labels in sequences]
        ids = [[self._neural_id(label) for label in labels] for labels in sequences]
        before = [self._neural_id(label) for label in place.before]
        oov = -math.log(max(1, self.unk - self.lm.cfg["vocab"]))  # <unk>'s share of each word it stands for
        words, ends = self.lm.word_and_end_logprobs(ids, before)
        return [float(w) + place.end(float(e)) + oov * seq.count(UNK) for w, e, seq in zip(words, ends, ids)]

    def scored(self, hypotheses: list, place: Place = Place()) -> list[tuple[tuple[int, ...], float]]:
        """(word labels, the second LM's score of them in `place`) of each of flashlight's hypotheses; a word
        sequence met twice (two alignments) is scored once."""
        words = [labels_of(hyp) for hyp in hypotheses]
        distinct = list(dict.fromkeys(words))
        second = dict(zip(distinct, self.lm_scores(distinct, place)))
        return [(labels, second[labels]) for labels in words]

    def _neural_id(self, label: int) -> int:
        if label not in self._ids:
            self._ids[label] = self.lm.id_of(self.words.get_entry(label)) if label < self.unk else UNK
        return self._ids[label]

    @classmethod
    def shared(cls, words: Dictionary, cfg: RescoreConfig) -> "Rescorer":
        """The Rescorer of these labels and settings, made once per process (a server's sessions share it)."""
        key = (words, cfg)  # the Dictionary itself (compared by identity), kept alive with its Rescorer
        if key not in _SHARED:
            _SHARED[key] = cls(words, cfg)
            while len(_SHARED) > 2:
                _SHARED.pop(next(iter(_SHARED)))
        return _SHARED[key]

    def rank(self, hypotheses: list, place: Place = Place(),
             first: list[float] | None = None) -> list[tuple[float, object]]:
        """flashlight's final hypotheses (best first) -> the first `nbest` as (new score, hypothesis), best first
        (ties keep the beam's order); `first`: the first-pass LM's score of each in `place` (None: the search's)."""
        cfg, ranked = self.cfg, []
        kept = hypotheses[: cfg.nbest]
        first = [hyp.lmScore for hyp in kept] if first is None else first
        for hyp, (labels, second), lm in zip(kept, self.scored(kept, place), first):
            ranked.append((hyp.emittingModelScore + cfg.first_weight * lm + cfg.weight * second
                           + cfg.word_score * len(labels), hyp))
        ranked.sort(key=lambda pair: -pair[0])
        return ranked


def labels_of(hypothesis) -> tuple[int, ...]:
    """The word labels on one of flashlight's hypotheses."""
    return tuple(label for label in hypothesis.words if label >= 0)


_SHARED: dict[tuple, Rescorer] = {}  # Rescorer.shared's: insertion order, oldest first
