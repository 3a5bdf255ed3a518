"""The numpy n-gram builder (asr.training.lm.kneser_ney, asr.training.lm.ngram): modified Kneser-Ney against a plain
dict implementation of Chen & Goodman's formulas, distributions that sum to one before and after pruning,
counting in shards, the ARPA file that KenLM reads with the same scores, perplexity, and book sentences."""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
from flashlight.lib.text.decoder.kenlm import KenLM
from flashlight.lib.text.dictionary import Dictionary

from asr.training.lm import kneser_ney as kn
from asr.training.lm.book_text import book_sentences
from asr.training.lm.ngram import BOS, EOS, UNK, pack, perplexity, read_arpa, write_arpa

TEXT = ["THE CAT SAT ON THE MAT", "THE DOG SAT ON THE LOG", "A CAT AND A DOG", "THE CAT RAN", "ON THE MAT THE CAT SAT",
        "A DOG RAN", "THE CAT SAT", "ZEBRA", "THE THE THE CAT"]
WORDS = [BOS, EOS, UNK] + sorted({w for s in TEXT for w in s.split()}) + ["NEVER"]  # NEVER: in no sentence
IDS = {w: i for i, w in enumerate(WORDS)}
HISTORIES = [(), ("THE",), ("<s>",), ("ZEBRA",), ("NEVER",), ("THE", "CAT"), ("<s>", "THE"), ("CAT", "DOG"),
             ("ON", "THE"), ("SAT", "ON"), ("A", "DOG")]


def counts_of(text: list[str]) -> kn.Counts:
    return kn.count(kn.flatten([IDS.get(w, 2) for w in s.split()] for s in text), 3)


def prob(model, word: str, history: tuple) -> float:
    return float(model.prob(pack(np.array([[IDS[w] for w in (*history, word)]])), len(history) + 1)[0])


def reference_kneser_ney(text: list[str], histories: list[tuple]) -> dict[tuple, float]:
    """p(w | h) for every history of up to two words and every word, by the formulas, with plain dicts."""
    raw = [Counter() for _ in range(4)]
    for s in text:
        tokens = [BOS, *s.split(), EOS]
        for n in (1, 2, 3):
            for i in range(len(tokens) - n + 1):
                raw[n][tuple(tokens[i:i + n])] += 1
    del raw[1][(BOS,)]
    adjusted = [None, Counter(), Counter(), raw[3]]
    for n in (1, 2):
        for gram in raw[n]:
            adjusted[n][gram] = raw[n][gram] if gram[0] == BOS else len({g for g in raw[n + 1] if g[1:] == gram})

    def discounts(counts: Counter) -> list[float]:
        nk = [sum(1 for c in counts.values() if c == k) for k in range(1, 5)]
        y = nk[0] / (nk[0] + 2 * nk[1]) if nk[0] + 2 * nk[1] else 0.5
        if 0 not in nk and all(0 < k - (k + 1) * y * nk[k] / nk[k - 1] < k for k in (1, 2, 3)):
            return [0.0] + [k - (k + 1) * y * nk[k] / nk[k - 1] for k in (1, 2, 3)]
        return [0.0] + [min(max(y, 0.1), 0.9)] * 3  # too few counts: one discount, as original Kneser-Ney

    d = [None] + [discounts(adjusted[n]) for n in (1, 2, 3)]
    vocab = [w for w in WORDS if w != BOS]

    def p(word: str, history: tuple) -> float:
        n = len(history) + 1
        if n == 1:
            total = sum(adjusted[1].values())
            gamma = sum(d[1][min(c, 3)] for c in adjusted[1].values()) / total
            c = adjusted[1].get((word,), 0)
            return max(c - d[1][min(c, 3)], 0) / total + gamma / len(vocab)
        followers = {g: c for g, c in adjusted[n].items() if g[:-1] == history}
        if not followers:
            return p(word, history[1:])
        total = sum(followers.values())
        gamma = sum(d[n][min(c, 3)] for c in followers.values()) / total
        c = followers.get((*history, word), 0)
        return max(c - d[n][min(c, 3)], 0) / total + gamma * p(word, history[1:])

    return {(h, w): p(w, h) for h in histories for w in vocab}


def babble(sentences: int, seed: int = 0) -> list[str]:
    """Random sentences over the toy vocabulary, skewed so that every order has n-grams seen 1, 2, 3 and 4 times."""
    rng = np.random.default_rng(seed)
    vocab = WORDS[3:-1]
    weights = 1.0 / np.arange(1, len(vocab) + 1)
    return [" ".join(rng.choice(vocab, size=rng.integers(1, 6), p=weights / weights.sum())) for _ in range(sentences)]


@pytest.mark.parametrize("text", [TEXT, babble(150)], ids=["few counts: one discount", "three discounts"])
def test_the_estimate_is_modified_kneser_ney_by_the_formulas(text: list[str]) -> None:
    counts = counts_of(text)
    if text is not TEXT:  # bigrams and trigrams have what Chen & Goodman's three discounts need
        for adjusted in kn.adjusted_counts(counts)[1:]:
            assert len(set(kn.discounts(adjusted)[1:])) == 3
    model = kn.estimate(counts, WORDS)
    for (history, word), expected in reference_kneser_ney(text, HISTORIES).items():
        assert math.isclose(prob(model, word, history), expected, rel_tol=1e-9), (history, word)
    assert prob(model, "NEVER", ()) > 0  # a vocabulary word the text never has keeps some mass


@pytest.mark.parametrize("min_counts", [[1, 1], [2, 2], [1, 3], [3, 3]])
def test_every_history_is_a_distribution_before_and_after_pruning(min_counts: list[int]) -> None:
    counts = counts_of(TEXT + ["THE CAT SAW A ZORK"])  # ZORK is outside the vocabulary: <unk>
    model = kn.prune_counts(kn.estimate(counts, WORDS), counts, min_counts)
    unk = IDS[UNK]
    for n in (2, 3):
        assert not (np.stack([(model.orders[n - 1].keys >> (21 * j)) & (2**21 - 1) for j in range(n)]) == unk).any()
    for history in HISTORIES:
        total = sum(prob(model, w, history) for w in WORDS if w != BOS)
        assert math.isclose(total, 1.0, rel_tol=1e-9), (min_counts, history, total)


def test_pruning_by_count_unlists_rare_ngrams_but_keeps_what_listed_ones_need() -> None:
    counts = counts_of(TEXT)
    full = kn.estimate(counts, WORDS).sizes()
    model = kn.prune_counts(kn.estimate(counts, WORDS), counts, [2, 2])
    assert model.sizes()[0] == full[0] and model.sizes()[1] < full[1] and model.sizes()[2] < full[2]
    bigrams = set(model.orders[1].keys.tolist())
    for key in model.orders[2].keys.tolist():  # each listed trigram's history and suffix are listed bigrams
        assert key >> 21 in bigrams and key & (2**42 - 1) in bigrams


def test_counts_taken_in_shards_and_merged_equal_the_whole() -> None:
    whole = counts_of(TEXT)
    merged = kn.merge([counts_of(TEXT[:3]), counts_of(TEXT[3:5]), counts_of(TEXT[5:])])
    for (keys, values), (merged_keys, merged_values) in zip(whole, merged):
        assert np.array_equal(keys, merged_keys) and np.array_equal(values, merged_values)
    assert sum(len(s.split()) + 1 for s in TEXT) == whole[0][1].sum()  # every word and </s>, never <s>


def test_kenlm_reads_the_compressed_arpa_and_scores_as_the_model_does(tmp_path: Path) -> None:
    counts = counts_of(TEXT)
    model = kn.prune_counts(kn.estimate(counts, WORDS), counts, [1, 2])
    path = tmp_path / "lm.arpa.gz"
    write_arpa(model, path)
    again = read_arpa(path)
    assert again.words == model.words and again.sizes() == model.sizes()
    dictionary = Dictionary()
    for word in WORDS:
        dictionary.add_entry(word)
    kenlm = KenLM(str(path), dictionary)
    for sentence in ["THE CAT SAT ON THE LOG", "A ZEBRA RAN", "NEVER THE DOG", "THE THE THE"]:
        state, history = kenlm.start(False), (BOS,)
        for word in sentence.split():
            state, score = kenlm.score(state, IDS[word])
            assert math.isclose(score, math.log10(prob(model, word, history[-2:])), abs_tol=2e-5), (sentence, word)
            history = (*history, word)


def test_perplexity_skips_oov_words_and_counts_them() -> None:
    model = kn.estimate(counts_of(TEXT), WORDS)
    ppl, oov = perplexity(model, ["THE CAT SAT", "THE QUAGGA SAT"])
    assert oov == pytest.approx(100 * 1 / 6)
    expected = [prob(model, "THE", (BOS,)), prob(model, "CAT", (BOS, "THE")), prob(model, "SAT", ("THE", "CAT")),
                prob(model, EOS, ("CAT", "SAT")), prob(model, "THE", (BOS,)), prob(model, "SAT", ("THE", UNK)),
                prob(model, EOS, (UNK, "SAT"))]
    assert ppl == pytest.approx(math.exp(-np.mean(np.log(expected))))


def test_book_paragraphs_become_normalised_sentences() -> None:
    paragraph = '"Well," said Mr. Holmes, "it was 1875." She left! J. R. Green wrote it [FN#32] later. Why? "Nobody knows."'
    assert book_sentences(paragraph) == ["WELL SAID MISTER HOLMES IT WAS EIGHTEEN SEVENTY FIVE",
                                         "SHE LEFT", "J R GREEN WROTE IT LATER", "WHY", "NOBODY KNOWS"]
    italics = "After her death, Mr. Browning published _Mr. Sludge, the Medium_, and *Dr. Grey* read it."
    assert book_sentences(italics) == ["AFTER HER DEATH MISTER BROWNING PUBLISHED MISTER SLUDGE THE MEDIUM AND DOCTOR "
                                       "GREY READ IT"]  # no sentence ends after a title in italics or bold
