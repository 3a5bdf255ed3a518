"""Word confidences: the CTC posterior of each word's units, and the share of the beam's competing hypotheses
that hold it; in every JSON output."""
from __future__ import annotations

import json

import numpy as np
import pytest

from asr import transcribe
from asr.decoding.confidence import competition, token_confidences, word_confidences
from asr.decoding.ctc import Token
from asr.decoding.decoder import Decoder
from helpers import ROOT
from test_hotwords import CHAR, spoken, toy_lm  # noqa: F401  (the toy LM fixture)

EXAMPLE = ROOT / "asr" / "examples" / "speechocean762_0813_0233.flac"


def test_a_unit_heard_less_surely_is_less_confident() -> None:
    logprobs = spoken("THE CAT", {"4": {"C": 0.45, "K": 0.4}})
    tokens = Decoder(CHAR).decode(logprobs)
    per_token = token_confidences(tokens, logprobs)
    assert np.allclose([p for i, p in enumerate(per_token) if i != 4], 0.8, atol=0.01)  # T H E | A T
    assert abs(per_token[4] - 0.45) < 0.01  # C, nearly confused with K
    the, cat = word_confidences(tokens, CHAR, logprobs)
    assert abs(the - 0.8) < 0.01 and abs(cat - (0.45 + 0.8 + 0.8) / 3) < 0.01  # the mean over the word's units
    shifted = token_confidences([Token(t.id, t.frame + 100) for t in tokens], logprobs, offset=100)
    assert shifted == per_token  # frames count from the segment's first


def test_the_beams_competition_lowers_a_disputed_word() -> None:
    the_cat = Decoder(CHAR).decode(spoken("THE CAT", {}))
    the_cot = Decoder(CHAR).decode(spoken("THE COT", {}))
    assert competition([("THE", 0), ("CAT", 8)], [(0.0, the_cat)], CHAR) == [1.0, 1.0]
    equal = competition([("THE", 0), ("CAT", 8)], [(0.0, the_cat), (0.0, the_cot)], CHAR)
    assert equal == [1.0, 0.5]  # THE in both, CAT in half
    behind = competition([("THE", 0), ("CAT", 8)], [(0.0, the_cat), (-4.0, the_cot)], CHAR)
    assert behind[0] == pytest.approx(1.0) and 0.5 < behind[1] < 1.0  # a weaker rival disputes less


def test_the_beam_search_gives_each_final_word_a_confidence(toy_lm) -> None:  # noqa: F811
    logprobs = spoken("THE DOG RAN", {"4": {"D": 0.42, "C": 0.4}, "5": {"O": 0.42, "A": 0.4}})
    decoder = Decoder(CHAR, toy_lm)
    search = decoder.search()
    search.push(logprobs)
    tokens, words = decoder.finish(search, 0.04, logprobs)
    assert len(search.alternatives()) > 1  # the beam had rivals
    assert [w.word for w in words] == decoder.text(tokens).split()
    assert all(0 <= w.confidence <= 1 for w in words) and words[1].confidence < min(words[0].confidence, words[2].confidence)
    assert decoder.finish(search, 0.04)[1][0].confidence is None  # no log-probs given: none computed


def test_transcribe_json_words_carry_confidences(capsys) -> None:
    for flags in ([], ["--greedy"]):
        assert transcribe.main([str(EXAMPLE), "--format", "json", *flags]) == 0
        words = json.loads(capsys.readouterr().out)["words"]
        assert words and all(set(w) == {"word", "start", "end", "confidence"} and 0 <= w["confidence"] <= 1
                             for w in words)

