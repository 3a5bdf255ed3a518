"""Linear interpolation of two back-off word LMs (asr.training.lm.mix): the mixture is a distribution for every
history, lists each n-gram at exactly weight * p_a + (1 - weight) * p_b, and KenLM reads it."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from asr.decoding.beam import WordLM
from asr.text.tokenizer import Tokenizer
from asr.training.lm.build import build_arpa
from asr.training.lm.mix import ArpaError, interpolate, main, mix_arpa, read_arpa
from test_lm import backoff_prob
from test_lm import read_arpa as read_entries

# Two toy corpora with different vocabularies (and orders, below): the mixture knows every word of both.
GENERAL = ["THE CAT SAT", "THE CAT RAN", "THE DOG SAT", "A DOG RAN HOME", "THE CAT SAT HOME", "A CAT"]
DOMAIN = ["ORDER THE ZORBLAX PRO", "THE ZORBLAX PRO SHIPS", "A ZORBLAX MINI", "SHIP THE MINI HOME"]
HISTORIES = [(), ("<s>",), ("THE",), ("ZORBLAX",), ("<s>", "THE"), ("THE", "CAT"), ("THE", "ZORBLAX"),
             ("ZORBLAX", "PRO"), ("CAT", "ZORBLAX"), ("HOME",), ("SHIPS", "A"), ("UNSEEN", "WORDS")]


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    folder = tmp_path_factory.mktemp("lm_mix")
    general, domain, mixed = folder / "general.arpa", folder / "domain.arpa", folder / "mixed.arpa"
    general.write_text(build_arpa(GENERAL, order=3))
    domain.write_text(build_arpa(DOMAIN, order=2))
    mix_arpa(domain, general, 0.3, mixed)
    return general, domain, mixed


@pytest.mark.parametrize("history", HISTORIES)
def test_the_mixture_is_a_distribution_for_every_history(toy, history: tuple) -> None:
    probs, backoffs = read_entries(toy[2].read_text())  # the test's own back-off reader, not the module's
    words = [g[0] for g in probs if len(g) == 1 and g[0] != "<s>"]  # both vocabularies, </s> and <unk>
    assert {"ZORBLAX", "CAT", "</s>", "<unk>"} <= set(words)
    total = sum(backoff_prob(w, history, probs, backoffs) for w in words)
    assert math.isclose(total, 1.0, rel_tol=1e-4), (history, total)


def test_listed_ngrams_are_the_weighted_sum_of_both_models(toy) -> None:
    general, domain, mixed = (read_arpa(path) for path in toy)
    assert mixed.order == 3
    for word, history in [("ZORBLAX", ("THE",)), ("CAT", ("THE",)), ("SAT", ("THE", "CAT")), ("PRO", ("ZORBLAX",)),
                          ("HOME", ()), ("<unk>", ())]:
        listed = mixed.word_prob(word, history)  # listed in one model, so in the mixture
        expected = 0.3 * domain.word_prob(word, history) + 0.7 * general.word_prob(word, history)
        assert math.isclose(listed, expected, rel_tol=1e-5), (word, history)
    assert general.word_prob("ZORBLAX") == 0.0  # a word one model does not know has no mass there
    assert mixed.word_prob("ZORBLAX", ("THE",)) > general.word_prob("ZORBLAX", ("THE",))


def test_the_end_weights_are_the_models_themselves(toy) -> None:
    general = read_arpa(toy[0])
    only_general = interpolate(read_arpa(toy[1]), general, 0.0)
    for history in HISTORIES:
        for word in ("CAT", "SAT", "</s>"):
            assert math.isclose(only_general.word_prob(word, history), general.word_prob(word, history), rel_tol=1e-5)
    assert only_general.word_prob("ZORBLAX", ("THE",)) == 0.0


def test_kenlm_reads_the_mixture_and_the_new_words_are_in_the_lexicon(toy) -> None:
    lexicon = WordLM(Tokenizer("char"), toy[2]).words
    assert all(lexicon.contains(word) for word in ("ZORBLAX", "MINI", "CAT", "DOG"))


def test_the_command_line_writes_the_mixture_and_refuses_a_bad_file_in_one_line(toy, tmp_path: Path, capsys) -> None:
    out = tmp_path / "cli.arpa"
    assert main([str(toy[1]), str(toy[0]), "--weight", "0.3", "--out", str(out)]) == 0
    assert out.read_text() == toy[2].read_text()
    assert "16 1-grams" in capsys.readouterr().err  # 13 words of both corpora, </s>, <unk> and <s>
    bad = tmp_path / "bad.arpa"
    bad.write_text("\\data\\\nngram 1=1\n\n\\1-grams:\n-1.0\n")
    assert main([str(bad), str(toy[0]), "--out", str(tmp_path / "never.arpa")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bad.arpa:5: not an ARPA n-gram line" in err
    assert not (tmp_path / "never.arpa").exists()
    with pytest.raises(ValueError, match="weight"):
        interpolate(read_arpa(toy[1]), read_arpa(toy[0]), 1.5)
    with pytest.raises(ArpaError, match="<unk>"):
        bad.write_text("\\data\\\nngram 1=1\n\n\\1-grams:\n-1.0\tCAT\n\n\\end\\\n")
        read_arpa(bad)
