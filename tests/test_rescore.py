"""The second pass: a larger word LM re-ranks each final's n-best (asr.decoding.rescore)."""
from __future__ import annotations

import argparse
import dataclasses
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from asr import cli
from asr.cli import checks
from asr.decoding.beam import BeamConfig, WordLM
from asr.decoding import rescore as rescore_module
from asr.decoding.decoder import Decoder
from asr.decoding.hotwords import parse_hotwords
from asr.decoding.endpoint import EndpointConfig, Segmenter
from asr.decoding.rescore import Place, RescoreConfig, Rescorer, ngram_score, paired_second_pass
from asr.pretrained import default_lm_path, default_rescore_lm_path
from asr.text.tokenizer import Tokenizer
from asr.training.lm import tune as tune_lm
from asr.training.lm.build import build_arpa
from helpers import emissions

# "THE ?AT": the acoustics barely tell C from H; the first LM slightly prefers CAT, the second one HAT by far
HEARD = [{"T": 0.9}, {"H": 0.9}, {"E": 0.9}, {"|": 0.9}, {"C": 0.46, "H": 0.44}, {"A": 0.9}, {"T": 0.9},
         {"<blank>": 0.9}]
FIRST = ["THE CAT SAT"] * 3 + ["THE HAT SAT"] * 2 + ["A DOG RAN"]
SECOND = ["THE HAT SAT"] * 10 + ["THE CAT SAT", "A DOG RAN"]


def lms(tmp_path: Path) -> tuple[Path, Path]:
    first, second = tmp_path / "first.arpa", tmp_path / "second.arpa"
    first.write_text(build_arpa(FIRST))
    second.write_text(build_arpa(SECOND))
    return first, second


def decoder(tokenizer: Tokenizer, first: Path, rescore: RescoreConfig | None) -> Decoder:
    word_lm = WordLM(tokenizer, first, BeamConfig(beam_size=32, lm_weight=1.0, word_score=0.5))
    return Decoder(tokenizer, word_lm, rescorer=Rescorer(word_lm.words, rescore) if rescore else None)


def test_at_the_first_pass_weights_the_second_pass_is_the_search_itself(tmp_path: Path) -> None:
    """acoustic + lm_weight x first LM + word_score x words is flashlight's own score: the second pass adds only
    the larger LM's term."""
    tokenizer = Tokenizer("char")
    first, second = lms(tmp_path)
    plain = decoder(tokenizer, first, None).search()
    same = decoder(tokenizer, first, RescoreConfig(str(second), weight=0.0, first_weight=1.0, word_score=0.5)).search()
    for search in (plain, same):
        search.push(emissions(tokenizer, HEARD))
        search.final()
    assert len(plain.ranked) > 2  # the beam had rivals
    assert [h.words for _, h in same.ranked] == [h.words for _, h in plain.ranked]
    for (score, _), (flashlight, _) in zip(same.ranked, plain.ranked):
        assert score == pytest.approx(flashlight, abs=1e-3)


def test_a_larger_lm_that_knows_better_changes_the_final_not_the_partials(tmp_path: Path) -> None:
    tokenizer = Tokenizer("char")
    first, second = lms(tmp_path)
    logprobs = emissions(tokenizer, HEARD)
    texts = {}
    for name, rescore in [("first", None),
                          ("second", RescoreConfig(str(second), weight=2.0, first_weight=0.0, word_score=0.5))]:
        both = decoder(tokenizer, first, rescore)
        search = both.search()
        search.push(logprobs[:5])
        partial = both.text(search.best())
        search.push(logprobs[5:])
        texts[name] = (partial, both.text(search.final()), search.alternatives())
    assert texts["first"][1] == "THE CAT"
    assert texts["second"][1] == "THE HAT"
    assert texts["first"][0] == texts["second"][0]  # partials are the first pass's
    scores = [score for score, _ in texts["second"][2]]
    assert scores == sorted(scores, reverse=True) and len(scores) > 1  # alternatives in the new order


def test_the_larger_lm_loads_on_the_first_final_and_not_for_a_hotword_list(tmp_path: Path) -> None:
    tokenizer = Tokenizer("char")
    first, second = lms(tmp_path)
    second_pass = decoder(tokenizer, first, RescoreConfig(str(second), weight=2.0, first_weight=0.0, word_score=0.5))
    assert second_pass.rescorer._lm is None  # nothing loaded until a final is ranked
    biased = second_pass.with_hotwords(parse_hotwords(["cat 1"], "hotwords", tokenizer))
    search = biased.search()
    search.push(emissions(tokenizer, HEARD))
    assert biased.text(search.final()) == "THE CAT"  # the list's first pass stands
    assert second_pass.rescorer._lm is None
    assert second_pass.text(second_pass.decode(emissions(tokenizer, HEARD))) == "THE HAT"
    assert second_pass.rescorer._lm is not None


def test_bundled_goes_with_the_bundled_lm_only(tmp_path: Path, monkeypatch) -> None:
    tokenizer = Tokenizer("char")
    first, second = lms(tmp_path)
    monkeypatch.setattr(rescore_module, "default_rescore_lm_path", lambda: second)  # as if the package shipped one
    assert Decoder.load(tokenizer, first, BeamConfig(beam_size=8), restorer=None).rescorer is None  # another LM
    chosen = Decoder.load(tokenizer, first, BeamConfig(beam_size=8), restorer=None, rescore=RescoreConfig(str(second)))
    assert chosen.rescorer is not None and chosen.rescorer.cfg.lm == str(second)
    assert chosen.spoken().rescorer is chosen.rescorer  # a changed decoder keeps its second pass


def model_folder_with(folder: Path, lm: Path | None, second: Path | None) -> Path:
    """A model folder (weights that are never read) with `lm` as its own LM and `second` as its second pass."""
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"never read here")
    for source, name in ((lm, "lm.arpa"), (second, "rescore.safetensors")):
        if source is not None:
            shutil.copyfile(source, folder / name)
    return folder


def test_one_rule_pairs_a_second_pass_with_a_model_and_its_lm(tmp_path: Path) -> None:
    """`paired_second_pass`, which the tools (Decoder.load), asr.finetune and its benchmark all ask."""
    first, second = lms(tmp_path)
    bundled = default_rescore_lm_path()
    assert paired_second_pass("bundled") == bundled  # the bundled LM: the bundled second pass, for any model
    assert paired_second_pass("bundled", tmp_path / "model.safetensors") == bundled
    assert paired_second_pass(default_lm_path()) is None  # an LM named by its path, even the bundled one
    assert paired_second_pass(None) is None  # no search, no second pass
    own = model_folder_with(tmp_path / "own", first, second)
    assert paired_second_pass(own / "lm.arpa", own) == own / "rescore.safetensors"  # a folder's after its own LM
    assert paired_second_pass(str(own / "lm.arpa"), str(own)) == own / "rescore.safetensors"
    assert paired_second_pass(first, own) is None  # after another LM: none
    assert paired_second_pass("bundled", own) == bundled
    plain = model_folder_with(tmp_path / "plain", first, None)  # its own LM, no second pass
    assert paired_second_pass(plain / "lm.arpa", plain) is None
    orphan = model_folder_with(tmp_path / "orphan", None, second)  # a second pass with no LM of its own to follow
    assert paired_second_pass("bundled", orphan) == bundled and paired_second_pass(second, orphan) is None


def options(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_decoder_args(parser)
    return parser.parse_args(list(argv))


def test_the_options_make_the_second_pass(tmp_path: Path) -> None:
    _, second = lms(tmp_path)
    assert cli.rescore_config(options()) == RescoreConfig()
    assert cli.rescore_config(options("--no-rescore")).lm is None
    chosen = cli.rescore_config(options("--rescore-lm", str(second), "--rescore-weight", "0.7", "--nbest", "8"))
    assert (chosen.lm, chosen.weight, chosen.nbest) == (str(second), 0.7, 8)
    with pytest.raises(checks.InputError, match="--no-rescore"):
        checks.decoding(options("--rescore-lm", str(second), "--no-rescore"))
    with pytest.raises(checks.InputError, match="missing.klm"):
        checks.decoding(options("--rescore-lm", str(tmp_path / "missing.klm")))
    with pytest.raises(ValueError, match="at least one"):
        RescoreConfig(nbest=0).validate()


def test_tune_lm_tunes_the_second_pass_over_kept_nbest_lists(tmp_path: Path, capsys) -> None:
    tokenizer = Tokenizer("char")
    first, second = lms(tmp_path)
    cfg = BeamConfig(beam_size=32, lm_weight=1.0, word_score=0.5)
    grid = tune_lm.rescore_grid([emissions(tokenizer, HEARD)], ["THE HAT"], tokenizer, str(first), cfg, str(second),
                                [0.0, 2.0], [0.0, 1.0], [0.5], nbest=16)
    assert [(w, f, s) for w, f, s, _, _ in grid] == [(0.0, 0.0, 0.5), (0.0, 1.0, 0.5), (2.0, 0.0, 0.5), (2.0, 1.0, 0.5)]
    rates = {(w, f): words.rate() for w, f, _, words, _ in grid}
    assert rates[(0.0, 1.0)] == 0.5  # the first pass's own score: THE CAT
    assert rates[(2.0, 0.0)] == 0.0  # the larger LM alone: THE HAT
    assert capsys.readouterr().out.count("rescore_weight=") == 4


def test_a_neural_lm_that_knows_better_changes_the_final(tmp_path: Path) -> None:
    """The second LM may be a neural word LM (a .safetensors file, asr.decoding.neural_lm), trained here for a few
    seconds on the same text as the larger n-gram: it prefers HAT after THE as much."""
    from asr.training.lm.neural import export, train

    tokenizer = Tokenizer("char")
    first, _ = lms(tmp_path)
    words = ["<s>", "<unk>", "THE", "HAT", "SAT", "CAT", "A", "DOG", "RAN"]
    index = {w: i for i, w in enumerate(words)}
    ids = np.array([i for _ in range(20) for s in SECOND for i in (0, *(index[w] for w in s.split()))] + [0] * 10,
                   dtype=np.uint16)
    model = train(ids, words, tmp_path / "state", minutes=5, save_minutes=5, steps=150, batch=8, threads=1,
                  config={"cutoffs": (4, 6), "dim": 32, "layers": 1, "heads": 2, "context": 8}, dev={},
                  log=lambda _: None)
    export(model, words, tmp_path / "neural.safetensors")
    config = RescoreConfig(str(tmp_path / "neural.safetensors"), weight=2.0, first_weight=0.0, word_score=0.5)
    assert decoder(tokenizer, first, None).text(decoder(tokenizer, first, None).decode(
        emissions(tokenizer, HEARD))) == "THE CAT"
    second_pass = decoder(tokenizer, first, config)
    assert second_pass.text(second_pass.decode(emissions(tokenizer, HEARD))) == "THE HAT"


def test_a_model_folders_second_pass_goes_with_its_own_lm(tmp_path: Path) -> None:
    """A model folder's rescore.safetensors (`asr.finetune` copies the starting model's) ranks the finals of a
    search with the folder's own LM, unless --no-rescore, and not those of another LM."""
    from asr import api  # noqa: PLC0415

    tokenizer = Tokenizer("char")
    first, second = lms(tmp_path)
    own = model_folder_with(tmp_path / "own", first, second)
    paired = Decoder.load(tokenizer, own / "lm.arpa", BeamConfig(beam_size=8), restorer=None, model=own)
    assert paired.rescorer is not None and paired.rescorer.cfg.lm == str(own / "rescore.safetensors")
    assert Decoder.load(tokenizer, own / "lm.arpa", BeamConfig(beam_size=8), restorer=None, model=own,
                        rescore=RescoreConfig(lm=None)).rescorer is None  # --no-rescore

    class Model:  # what load_decoder asks of a recognizer
        pass

    recognizer = Model()
    recognizer.tokenizer = tokenizer
    made = api.load_decoder(recognizer, bundled=False, lm=None, beam_config=BeamConfig(beam_size=8), restore=False,
                            own_lm=own / "lm.arpa", model=own)
    assert made.rescorer is not None and made.rescorer.cfg.lm == str(own / "rescore.safetensors")
    other = tmp_path / "other.arpa"
    other.write_text(build_arpa(FIRST))
    assert api.load_decoder(recognizer, bundled=False, lm=other, beam_config=BeamConfig(beam_size=8), restore=False,
                            own_lm=own / "lm.arpa", model=own).rescorer is None


# "?AT" cut from the words before it: C and H heard alike; alone the LM prefers CAT, after MY it prefers HAT
AFTER = ["MY HAT IS RED"] * 3 + ["THE CAT IS BLACK"] * 4 + ["CAT"] * 2
HEARD_ALONE = [{"C": 0.46, "H": 0.44}, {"A": 0.9}, {"T": 0.9}, {"<blank>": 0.9}]


def test_in_place_an_ngram_scores_what_the_words_add_to_the_stream(tmp_path: Path) -> None:
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(AFTER))
    word_lm = WordLM(Tokenizer("char"), arpa, BeamConfig(beam_size=8))
    ken, unk, label = word_lm.lm, word_lm.unk, word_lm.labels
    before, words = label(["THE", "CAT"]), label(["IS", "BLACK"])
    whole = ngram_score(ken, unk, before + words)
    open_before = ngram_score(ken, unk, before, Place(mid=1.0))  # no end: the sentence goes on
    assert ngram_score(ken, unk, words, Place(before)) == pytest.approx(whole - open_before, abs=1e-5)
    going_on = ngram_score(ken, unk, before + words, Place(mid=1.0)) - open_before
    assert ngram_score(ken, unk, words, Place(before, mid=1.0)) == pytest.approx(going_on, abs=1e-5)
    end = 10 ** (whole - open_before - going_on)  # P(</s> | THE CAT IS BLACK)
    assert ngram_score(ken, unk, words, Place(before, mid=0.1)) == pytest.approx(
        going_on + math.log10(end + 0.1 * (1 - end)), abs=1e-5)
    assert label(["NOWHERE"]) == (unk,)


@pytest.mark.parametrize("second_pass", [False, True])
def test_a_cut_segment_is_decided_after_the_words_before_it(tmp_path: Path, second_pass: bool) -> None:
    """The same frames: CAT on their own, HAT after a final that said MY (with the second pass too, here the same
    n-gram)."""
    tokenizer = Tokenizer("char")
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(AFTER))
    rescore = RescoreConfig(str(arpa), weight=1.0, first_weight=0.0, word_score=0.0) if second_pass else None
    both = decoder(tokenizer, arpa, rescore)
    alone = emissions(tokenizer, HEARD_ALONE)
    assert both.text(both.decode(alone)) == "CAT"
    search = both.search(0, before=["MY"])
    search.push(alone)
    assert both.text(search.final(mid=1.0)) == "HAT"
    stream = emissions(tokenizer, [{"M": 0.9}, {"Y": 0.9}] + [{"<blank>": 0.9}] * 15 + [{"|": 0.9}] + HEARD_ALONE)
    for words_before, expected in [(16, ["MY", "HAT"]), (0, ["MY", "CAT"])]:  # 0: each segment on its own
        rules = dataclasses.replace(EndpointConfig.fixed(0.4), words_before=words_before, mid_sentence=1.0)
        segmenter = Segmenter(both, 0.04, rules)
        finals = [e.text for e in segmenter.push(stream, 1.0) + segmenter.finish(1.0) if e.is_final]
        assert finals == expected


def test_a_pause_that_may_be_inside_a_sentence_weighs_its_end(tmp_path: Path) -> None:
    """CAT goes on to SAT, HAT ends its sentence: ended there, HAT; at a pause that tells nothing, CAT."""
    tokenizer = Tokenizer("char")
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(["CAT SAT"] * 3 + ["HAT"] * 2))
    texts = {}
    for mid in (0.0, 1.0):
        search = decoder(tokenizer, arpa, None).search()
        search.push(emissions(tokenizer, HEARD_ALONE))
        texts[mid] = decoder(tokenizer, arpa, None).text(search.final(mid))
    assert texts == {0.0: "HAT", 1.0: "CAT"}
