"""The word LM's fast forms: KenLM's binary beside (or cached for) an ARPA, and the lexicon's cached arrays."""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from flashlight.lib.text.decoder.kenlm import KenLM
from flashlight.lib.text.dictionary import Dictionary

from asr.decoding import beam, lexicon_cache, lm_binary
from asr.decoding.beam import BeamConfig, WordLM
from asr.decoding.hotwords import Hotword
from asr.pretrained import default_lm_path
from asr.text.tokenizer import Tokenizer
from asr.training.finetune.lm import binary_beside
from asr.training.lm.build import build_arpa
from asr.training.lm.mix import mix_arpa
from helpers import emissions

CORPUS = ["THE CAT SAT", "THE CAT RAN", "THE DOG SAT", "A DOG RAN HOME", "THE CAT SAT HOME", "A CAT"]
OTHER = ["MY FROG JUMPED", "THE FROG SAT", "A FROG RAN HOME"]
SENTENCES = ["THE CAT SAT HOME", "A DOG SAT", "HOME THE THE", "A ZEBRA RAN", "THE FROG JUMPED"]


@pytest.fixture
def tool() -> Path:
    found = lm_binary.find_tool()
    if found is None:
        pytest.skip("KenLM's build_binary is not installed (bash scripts/build_kenlm.sh)")
    return found


@pytest.fixture
def cache(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("ASR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(lm_binary, "CONVERT_FROM", 0)  # every LM is "large": converted and cached on first use
    return tmp_path / "cache"


def scores(path: Path, sentences: list[str] = SENTENCES) -> list[float]:
    """KenLM's score of every word and sentence end of `sentences`."""
    words = Dictionary(sorted({w for s in sentences for w in s.split()}) + ["<unk>"])
    lm, found = KenLM(str(path), words), []
    for sentence in sentences:
        state = lm.start(False)
        for word in sentence.split():
            state, score = lm.score(state, words.get_index(word))
            found.append(score)
        found.append(lm.finish(state)[1])
    return found


def write_gz(path: Path, sentences: list[str]) -> Path:
    path.write_bytes(gzip.compress(build_arpa(sentences).encode()))
    return path


def test_the_binary_scores_exactly_as_the_arpa(tmp_path: Path, tool: Path) -> None:
    arpa = write_gz(tmp_path / "lm.arpa.gz", CORPUS)
    binary = lm_binary.write_binary(arpa)
    assert binary == tmp_path / "lm.klm" and lm_binary.is_binary(binary) and not lm_binary.is_binary(arpa)
    assert scores(binary) == scores(arpa)  # the same floats: the trie stores the ARPA's values unquantised
    assert lm_binary.fast_form(arpa) == binary


def test_the_shipped_binary_is_the_shipped_arpas() -> None:
    arpa = default_lm_path()
    binary = lm_binary.beside(arpa)
    assert lm_binary.matches(binary, lm_binary.stamp(arpa)), "rebuild it: python -m asr.decoding.lm_binary " + str(arpa)
    assert lm_binary.fast_form(arpa) == binary
    sentences = ["THE WATER WAS COLD", "I PAID TWENTY FIVE DOLLARS AT THREE THIRTY", "AND THEN SHE WENT TO THE WINDOW"]
    assert scores(binary, sentences) == scores(arpa, sentences)


def test_a_replaced_arpa_is_never_scored_with_its_old_binary(tmp_path: Path, tool: Path, cache: Path,
                                                             monkeypatch) -> None:
    arpa = write_gz(tmp_path / "lm.arpa.gz", CORPUS)
    old = lm_binary.write_binary(arpa)
    write_gz(arpa, OTHER + CORPUS)
    converted = lm_binary.fast_form(arpa)  # converted into the cache, the stale one beside left alone
    assert converted.parent == cache / "lm" and converted != old
    assert scores(converted) == scores(arpa) != scores(old)
    lm_binary.forget(arpa)
    assert not converted.exists() and old.exists()
    monkeypatch.setattr(lm_binary, "find_tool", lambda: None)
    write_gz(arpa, CORPUS[:3])
    assert lm_binary.fast_form(arpa) == arpa  # no build_binary: KenLM parses the ARPA


def test_a_users_arpa_loads_with_or_without_build_binary(tmp_path: Path, tool: Path, cache: Path, monkeypatch) -> None:
    arpa = tmp_path / "mine.arpa"
    arpa.write_text(build_arpa(CORPUS))
    tokenizer = Tokenizer("char")
    spoken = [{"T": 0.9}, {"H": 0.9}, {"E": 0.9}, {"|": 0.9}, {"K": 0.55, "C": 0.4}, {"A": 0.9}, {"T": 0.9}]
    logprobs = emissions(tokenizer, spoken)
    converted = WordLM(tokenizer, arpa)
    assert list((cache / "lm").glob("mine-*.klm")), "an LM is converted on first use"
    monkeypatch.setattr(lm_binary, "find_tool", lambda: None)
    monkeypatch.setenv("ASR_CACHE_DIR", str(tmp_path / "empty"))
    parsed = WordLM(tokenizer, arpa)
    results = []
    for lm in (converted, parsed):
        search = lm.search()
        search.push(logprobs)
        results.append([(t.id, t.frame) for t in search.final()])
    assert results[0] == results[1]
    assert tokenizer.decode([unit for unit, _ in results[0]]) == "THE CAT"  # the LM's word, not the sounds' "KAT"


def test_the_lexicon_cache_gives_the_same_search_and_skips_the_arpa(tmp_path: Path, cache: Path, monkeypatch) -> None:
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(CORPUS))
    tokenizer = Tokenizer.from_bytes(Tokenizer("char").to_bytes())  # loaded from bytes: it has a fingerprint
    first = WordLM(tokenizer, arpa, BeamConfig(beam_size=8))
    assert len(list((cache / "lexicon").glob("*.npz"))) == 1
    with monkeypatch.context() as patched:
        patched.setattr(beam, "arpa_words", lambda path: pytest.fail("the cached lexicon read the ARPA again"))
        second = WordLM(tokenizer, arpa, BeamConfig(beam_size=8))
    assert [second.words.get_entry(i) for i in range(second.words.index_size())] == \
        [first.words.get_entry(i) for i in range(first.words.index_size())]
    assert first._entries is None and second._entries is None  # cached: not held, read again when asked for
    held = {name: getattr(first.entries, name) for name in lexicon_cache.ARRAYS}
    for name in lexicon_cache.ARRAYS:
        assert np.array_equal(getattr(second.entries, name), held[name]), name
    frog = second.biasing.get([Hotword(("FROG",), 5.0)])  # a hotword list's trie: the cached entries, and its word
    assert frog.added == ["FROG"] and frog.trie is not second.trie
    logprobs = emissions(tokenizer, [{"A": 0.9}, {"|": 0.9}, {"K": 0.55, "C": 0.4}, {"A": 0.9}, {"T": 0.9}])
    texts = []
    for lm in (first, second):
        search = lm.search()
        search.push(logprobs)
        texts.append(tokenizer.decode([t.id for t in search.final()]))
    assert texts[0] == texts[1] == "A CAT"
    arpa.write_text(build_arpa(OTHER))  # a rewritten LM is spelled again, its cache file replaced
    again = WordLM(tokenizer, arpa, BeamConfig(beam_size=8))
    assert again.words.contains("FROG") and not again.words.contains("CAT")
    assert len(list((cache / "lexicon").glob("*.npz"))) == 1
    lexicon_cache.forget(arpa)
    assert not list((cache / "lexicon").glob("*.npz"))
    for name in lexicon_cache.ARRAYS:  # the cache gone: the lexicon's own words spelled again, the same entries
        assert np.array_equal(getattr(again.entries, name), getattr(WordLM(tokenizer, arpa).entries, name)), name


def test_a_tokenizer_made_in_code_is_never_cached(tmp_path: Path, cache: Path) -> None:
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(CORPUS))
    WordLM(Tokenizer("char"), arpa)
    assert not (cache / "lexicon").exists()


def test_a_fine_tunes_mixed_lm_gets_a_binary_that_loads(tmp_path: Path, tool: Path) -> None:
    base, text = tmp_path / "base.arpa", tmp_path / "text.arpa"
    base.write_text(build_arpa(CORPUS))
    text.write_text(build_arpa(OTHER))
    mixed = tmp_path / "lm.arpa.gz"
    mix_arpa(text, base, 0.3, mixed)  # what asr.finetune's LM stage writes
    assert "loads at once" in binary_beside(mixed)
    assert lm_binary.fast_form(mixed) == tmp_path / "lm.klm"
    assert scores(tmp_path / "lm.klm") == scores(mixed)
    lm = WordLM(Tokenizer("char"), mixed)
    assert lm.words.contains("FROG") and lm.words.contains("CAT")
