"""The word LM (ARPA writer) and the lexicon beam search."""
from __future__ import annotations

import json
import math
from types import SimpleNamespace
from pathlib import Path

import pytest

from asr import cli, evaluate, stream, transcribe
from asr.decoding.beam import BeamConfig, LMError, WordLM, arpa_words
from asr.decoding.ctc import greedy_decode, word_times
from asr.decoding.decoder import Decoder
from asr.decoding.endpoint import EndpointConfig, Segmenter
from asr.pretrained import default_lm_path
from asr.text.tokenizer import Tokenizer
from asr.training.lm import build as lm
from asr.training.lm import tune as tune_lm
from asr.training.lm.build import build_arpa
from helpers import emissions

CORPUS = ["THE CAT SAT", "THE CAT RAN", "THE DOG SAT", "A DOG RAN HOME", "THE CAT SAT HOME", "A CAT"]


def read_arpa(text: str) -> tuple[dict[tuple, float], dict[tuple, float]]:
    """log10 probabilities and back-off weights of every listed n-gram."""
    probs, backoffs = {}, {}
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) >= 2 and not line.startswith("ngram"):
            gram = tuple(fields[1].split())
            probs[gram] = float(fields[0])
            if len(fields) == 3:
                backoffs[gram] = float(fields[2])
    return probs, backoffs


def backoff_prob(word: str, history: tuple, probs: dict, backoffs: dict) -> float:
    """p(word | history) as a back-off reader (KenLM) computes it from the ARPA entries."""
    gram = (*history, word)
    if gram in probs:
        return 10 ** probs[gram]
    if not history:
        return 10 ** probs[("<unk>",)]
    return 10 ** backoffs.get(history, 0.0) * backoff_prob(word, history[1:], probs, backoffs)


@pytest.mark.parametrize("min_count", [1, 2])
@pytest.mark.parametrize("history", [(), ("<s>",), ("THE",), ("<s>", "THE"), ("THE", "CAT"), ("DOG", "RAN"),
                                     ("SAT", "THE"), ("HOME",), ("CAT", "SAT"), ("A", "DOG")])
def test_arpa_is_a_distribution_for_every_history(history: tuple, min_count: int) -> None:
    probs, backoffs = read_arpa(build_arpa(CORPUS, order=3, min_count=min_count))
    words = [g[0] for g in probs if len(g) == 1 and g[0] != "<s>"]  # vocabulary, </s> and <unk>
    total = sum(backoff_prob(w, history, probs, backoffs) for w in words)
    assert math.isclose(total, 1.0, rel_tol=1e-4), (history, total)


def test_pruning_unlists_rare_ngrams_and_keeps_the_vocabulary() -> None:
    full, _ = read_arpa(build_arpa(CORPUS, order=3))
    pruned, _ = read_arpa(build_arpa(CORPUS, order=3, min_count=2))
    assert {g for g in full if len(g) == 1} == {g for g in pruned if len(g) == 1}
    assert ("THE", "CAT") in pruned and ("THE", "CAT", "SAT") in pruned  # seen 3 and 2 times
    assert ("DOG", "RAN") not in pruned and ("A", "DOG", "RAN") not in pruned  # seen once
    assert ("A", "DOG", "RAN") in full


def test_seen_continuations_beat_unseen_ones() -> None:
    probs, backoffs = read_arpa(build_arpa(CORPUS, order=3))
    assert backoff_prob("CAT", ("<s>", "THE"), probs, backoffs) > backoff_prob("HOME", ("<s>", "THE"), probs, backoffs)
    unigram = backoff_prob("ZEBRA", (), probs, backoffs)
    assert 0 < backoff_prob("ZEBRA", ("THE",), probs, backoffs) < unigram  # a seen history keeps mass for its words
    assert backoff_prob("ZEBRA", ("YAK",), probs, backoffs) == unigram  # an unseen history adds nothing


def test_lm_from_a_manifest_reads_only_the_asked_split(tmp_path: Path) -> None:
    manifest = tmp_path / "m.jsonl"
    rows = [{"audio": "a.wav", "duration": 1.0, "text": "one two", "split": "train"},
            {"audio": "b.wav", "duration": 1.0, "text": "held out", "split": "test"},
            {"audio": "c.wav", "duration": 1.0, "text": "no split"}]
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert lm.main([str(manifest), "--split", "train", "--out", str(tmp_path / "lm.arpa")]) == 0
    assert set(arpa_words(tmp_path / "lm.arpa")) == {"ONE", "TWO", "NO", "SPLIT"}


def beam_decoder(tokenizer: Tokenizer, arpa: Path, **cfg) -> Decoder:
    return Decoder(tokenizer, WordLM(tokenizer, arpa, BeamConfig(**{"beam_size": 16, "lm_weight": 1.0, **cfg})))


SPOKEN = [{"T": 0.9}, {"H": 0.9}, {"E": 0.9}, {"|": 0.9}, {"K": 0.5, "C": 0.4}, {"A": 0.9}, {"T": 0.9},
          {"|": 0.9}, {"<blank>": 0.9}]  # "THE KAT" greedily, "THE CAT" with the LM


def test_beam_search_with_lexicon_corrects_an_acoustic_confusion(tmp_path: Path) -> None:
    tokenizer = Tokenizer("char")
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(CORPUS))
    assert sorted(arpa_words(arpa)) == ["A", "CAT", "DOG", "HOME", "RAN", "SAT", "THE"]
    logprobs = emissions(tokenizer, SPOKEN)
    assert tokenizer.decode(greedy_decode(logprobs)) == "THE KAT"
    decoder = beam_decoder(tokenizer, arpa)
    assert decoder.text(decoder.decode(logprobs)) == "THE CAT"
    assert decoder.text(decoder.decode(logprobs[:0])) == ""


def test_the_last_word_needs_no_separator_after_it(tmp_path: Path) -> None:
    """Training targets put "|" only between words ("THE|CAT"), so a real model ends an utterance with
    the last letter and then blanks; the beam must still finish and output that last word."""
    tokenizer = Tokenizer("char")
    assert tokenizer.decode(tokenizer.encode("THE CAT")) == "THE CAT" and tokenizer.encode("THE CAT")[-1] != 2
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(CORPUS))
    as_trained = [{"T": 0.9}, {"H": 0.9}, {"E": 0.9}, {"|": 0.9}, {"C": 0.9}, {"A": 0.9}, {"T": 0.9},
                  {"<blank>": 0.9}, {"<blank>": 0.9}]
    decoder = beam_decoder(tokenizer, arpa)
    assert decoder.text(decoder.decode(emissions(tokenizer, as_trained))) == "THE CAT"
    assert decoder.text(decoder.decode(emissions(tokenizer, as_trained[:3]))) == "THE"  # a one-word utterance
    tokens = decoder.decode(emissions(tokenizer, as_trained))
    assert max(t.frame for t in tokens) <= len(as_trained) - 1  # the appended frame maps to a real one
    assert [w.word for w in word_times(tokens, tokenizer, 0.04)] == ["THE", "CAT"]


def test_evaluate_with_a_missing_lm_fails_in_one_line(tmp_path: Path, capsys, speech_wav: Path, model_path: Path) -> None:
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio": str(speech_wav), "duration": 2.0, "text": "THE QUICK BROWN FOX"}) + "\n")
    args = ["--manifest", str(manifest), "--model", str(model_path), "--lm", str(tmp_path / "missing.arpa")]
    assert evaluate.main(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) >= 1 and err[-1].startswith("asr.evaluate: error:") and "missing.arpa" in err[-1]


@pytest.mark.skipif(default_lm_path() is None, reason="no word LM bundled")
def test_evaluate_beam_uses_the_bundled_lm(tmp_path: Path, capsys, speech_wav: Path, model_path: Path) -> None:
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio": str(speech_wav), "duration": 2.0, "text": "THE QUICK BROWN FOX"}) + "\n")
    report = tmp_path / "report.json"
    args = ["--manifest", str(manifest), "--model", str(model_path), "--beam", "--report", str(report)]
    assert evaluate.main(args) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("WER=")
    saved = json.loads(report.read_text())
    assert saved["decoder"] == "beam" and set(saved["utterances"][0]["hyp"].split()) <= set(arpa_words(default_lm_path()))


def test_partials_and_finals_come_from_one_incremental_beam_search(tmp_path: Path) -> None:
    tokenizer = Tokenizer("char")
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(CORPUS))
    logprobs = emissions(tokenizer, SPOKEN)
    decoder = beam_decoder(tokenizer, arpa)
    tokens = decoder.decode(logprobs, offset=100)
    assert decoder.text(tokens) == "THE CAT"
    assert [t.frame for t in tokens if tokenizer.decode([t.id])] == [100, 101, 102, 104, 105, 106]
    search = decoder.search()  # fed in pieces: the partial after each piece is the LM's best so far
    search.push(logprobs[:3])
    assert decoder.text(search.best()) == "THE"
    search.push(logprobs[3:])
    assert decoder.text(search.best()) == "THE CAT"  # the LM has already corrected KAT
    assert decoder.text(search.final()) == "THE CAT" and search.final() == search.final()
    segmenter = Segmenter(decoder, 0.04, EndpointConfig(trailing_silence=1.2))
    partial = segmenter.push(logprobs, 0.36, 1.0)
    assert [(e.text, e.is_final) for e in partial] == [("THE CAT", False)]
    [final] = segmenter.finish(0.36)
    assert (final.text, final.is_final) == ("THE CAT", True)
    assert final.compute_ms > 0  # finish() adds no step compute: this is the search's own time
    assert [(w.word, round(w.start, 2), round(w.end, 2)) for w in final.words] == [("THE", 0.0, 0.12), ("CAT", 0.16, 0.28)]


def test_cli_decoder_choice(tmp_path: Path) -> None:
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(CORPUS))
    recognizer = SimpleNamespace(tokenizer=Tokenizer("char"))
    options = dict(beam_size=8, beam_threshold=15.0, lm_weight=1.0, word_score=0.0, onnx_dir=None)

    def kind(**flags) -> str:
        return cli.load_decoder(SimpleNamespace(**{"greedy": False, "beam": False, "lm": None, **options, **flags}),
                                recognizer).kind

    # every tool alike: --greedy wins; a model of your own is greedy unless --lm (or --beam) asks for the LM
    assert kind(model="m") == "greedy" and kind(model="m", lm=str(arpa)) == "beam"
    assert kind(model=None, greedy=True) == "greedy"
    if default_lm_path() is not None:
        assert kind(model=None) == "beam"  # the bundled model decodes with the bundled LM by default
    with pytest.raises(ValueError, match="--greedy cannot be combined"):
        kind(model="m", greedy=True, lm=str(arpa))


@pytest.mark.parametrize("content, reason", [(b"# just a README\n", "not an ARPA language model"),
                                             (b"\x89PNG\r\n\x1a\n\x00\xff\xfe", "not an ARPA language model"),
                                             (b"\\data\\\nngram 1=2\n\n\\end\\\n", "no unigrams")])
def test_a_bad_lm_file_is_one_clear_line(tmp_path: Path, capsys, speech_wav: Path, model_path: Path,
                                        content: bytes, reason: str) -> None:
    bad = tmp_path / "bad.arpa"
    bad.write_bytes(content)
    with pytest.raises(LMError, match=reason):
        WordLM(Tokenizer("char"), bad)
    for main, tool in ((transcribe.main, "transcribe"), (stream.main, "stream")):
        args = [str(speech_wav)] if tool == "transcribe" else ["--file", str(speech_wav)]
        assert main([*args, "--model", str(model_path), "--lm", str(bad)]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"asr.{tool}: error: {bad}: ") and reason in err[0]


@pytest.mark.parametrize("size", ["0", "-5"])
def test_a_non_positive_beam_size_is_refused(size: str, capsys, speech_wav: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        transcribe.main([str(speech_wav), "--beam-size", size])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"asr.transcribe: error: argument --beam-size: must be > 0 (got {size}) "
        "(python -m asr.transcribe --help lists the options)"]


def test_tune_lm_scores_every_grid_point(tmp_path: Path) -> None:
    tokenizer = Tokenizer("char")
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(CORPUS))
    logprobs = emissions(tokenizer, SPOKEN)  # greedy "THE KAT": WER 50% against "THE CAT"
    rows = tune_lm.grid_search([logprobs], ["THE CAT"], tokenizer, str(arpa), [0.5, 1.0], [-1.0, 0.0], 16)
    assert [(weight, word_score) for weight, word_score, _, _ in rows] == [(0.5, -1.0), (0.5, 0.0), (1.0, -1.0), (1.0, 0.0)]
    assert all(words.ref == 2 for _, _, words, _ in rows) and min(r[2].rate() for r in rows) == 0.0


def test_tune_lm_cli(tmp_path: Path, capsys, speech_wav: Path, model_path: Path) -> None:
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio": str(speech_wav), "duration": 2.0, "text": "THE CAT SAT"}) + "\n")
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(CORPUS))
    args = ["--manifest", str(manifest), "--model", str(model_path), "--lm", str(arpa)]
    assert tune_lm.main([*args, "--lm-weights", "0.5", "1", "--word-scores", "0"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 3 and out[0].startswith("lm_weight=0.5 word_score=0 WER=")
    assert out[-1].startswith(f"best: --lm {arpa} --lm-weight ") and out[-1].endswith("utts=1")
    other = tmp_path / "other.arpa"  # several LMs: one grid each over the same log-probs
    other.write_text(build_arpa(["A DOG RAN"]))
    assert tune_lm.main([*args, str(other), "--lm-weights", "1", "--word-scores", "0"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert [line.split()[0] for line in out[:-1]] == [f"lm={arpa}", "lm_weight=1", f"lm={other}", "lm_weight=1"]
    assert out[-1].startswith("best: --lm ")
    assert tune_lm.main([*args[:-1], str(tmp_path / "missing.arpa")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("asr.training.lm.tune: error:") and "missing.arpa" in err[0]


def test_the_lexicon_is_the_lms_most_probable_words(tmp_path: Path) -> None:
    tokenizer = Tokenizer("char")
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(CORPUS + ["MY CAT", "HIS CAT", "ON THE", "BY THE"]))
    ranked = arpa_words(arpa)
    # Kneser-Ney ranks unigrams by the number of words seen before them: CAT 4, THE 3, the others 2 or fewer
    assert ranked[:2] == ["CAT", "THE"] and len(ranked) == 11
    logprobs = emissions(tokenizer, SPOKEN)  # "THE CAT" (or "THE KAT" greedily)
    two = beam_decoder(tokenizer, arpa, lexicon_words=2)
    assert two.text(two.decode(logprobs)) == "THE CAT"
    only_one = beam_decoder(tokenizer, arpa, lexicon_words=1)
    assert set(only_one.text(only_one.decode(logprobs)).split()) <= {ranked[0]}
    with pytest.raises(ValueError, match="lexicon words must be >= 1"):
        BeamConfig(lexicon_words=0).validate()


def test_the_token_beam_keeps_each_frames_likeliest_units(tmp_path: Path) -> None:
    tokenizer = Tokenizer("char")
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(CORPUS))
    logprobs = emissions(tokenizer, SPOKEN)  # the C of "CAT" is its frame's second likeliest unit
    two = beam_decoder(tokenizer, arpa, token_beam=2)
    assert two.text(two.decode(logprobs)) == "THE CAT"
    one = beam_decoder(tokenizer, arpa, token_beam=1)
    assert "CAT" not in one.text(one.decode(logprobs)).split()
    with pytest.raises(ValueError, match="token beam must be >= 1"):
        BeamConfig(token_beam=0).validate()
