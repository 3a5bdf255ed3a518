"""Hotwords: the list's parsing and errors, and the biased beam search (controlled log-probs and real speech)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from asr import evaluate, stream, transcribe
from asr.decoding.beam import BeamConfig, WordLM
from asr.decoding.decoder import Decoder
from asr.decoding.hotwords import DEFAULT_BOOST, Hotword, HotwordError, parse_hotwords, read_hotwords
from asr.pretrained import default_lm_path, default_model_path
from asr.text.tokenizer import Tokenizer
from asr.training.lm.build import build_arpa
from helpers import emissions

CHAR = Tokenizer("char")
CORPUS = ["THE CAT SAT", "THE CAT RAN", "THE DOG SAT", "A DOG RAN HOME", "THE CAT SAT HOME", "A CAT"]


def test_a_list_gives_words_phrases_and_boosts() -> None:
    lines = ["# names", "", "jessica pemberton 3.0", "Okonkwo", "  st. john-smith  12 ", "OKONKWO 2"]
    assert parse_hotwords(lines, "x", CHAR) == [
        Hotword(("JESSICA", "PEMBERTON"), 3.0), Hotword(("OKONKWO",), 2.0), Hotword(("SAINT", "JOHN", "SMITH"), 12.0)]  # a title as said
    assert parse_hotwords(["zorblax"], "x", CHAR) == [Hotword(("ZORBLAX",), DEFAULT_BOOST)]


def test_a_list_keeps_the_users_spelling_where_it_has_capitals() -> None:
    lines = ["Jessica Pemberton 12", "iPhone", "st. John-Smith", "okonkwo", "O'Brien", "NASA"]
    assert [h.written for h in parse_hotwords(lines, "x", CHAR)] == [
        ("Jessica", "Pemberton"), ("iPhone",), ("", "John", "Smith"), ("",), ("O'Brien",), ("NASA",)]


def test_restored_finals_keep_a_listed_words_casing(toy_lm: WordLM) -> None:
    """The restorer has not seen "Pemberton" and writes it lower case; the list's spelling wins in the final
    (its mark kept), and a word written all lower case in the list is left to the restorer."""
    from asr.text.restore.restorer import bundled_restorer, load_restorer
    if bundled_restorer() is None:
        pytest.skip("no restorer is bundled")
    plain = "YESTERDAY I MET JESSICA PEMBERTON AND HER IPHONE"
    restorer = Decoder(CHAR, toy_lm, restorer=load_restorer())
    assert "Jessica Pemberton" not in restorer.restore(plain)  # what the issue saw
    listed = restorer.with_hotwords(parse_hotwords(["Jessica Pemberton", "iPhone 3", "yesterday"], "x", CHAR))
    restored = listed.restore(plain)
    assert restored.startswith("Yesterday") and "Jessica Pemberton" in restored and "iPhone" in restored, restored
    assert restored.lower() == restorer.restore(plain).lower()  # casing only: the marks are the restorer's
    assert listed.restore("JESSICA PEMBERTON") .startswith("Jessica Pemberton")
    assert Decoder(CHAR, toy_lm).with_hotwords(parse_hotwords(["Jessica"], "x", CHAR)).restore("JESSICA") is None


@pytest.mark.parametrize("content, line, reason", [
    (b"", None, "no hotwords"),
    (b"# only a comment\n\n", None, "no hotwords"),
    (b"\x89PNG\r\n\x1a\n\x00\xff", None, "not a text file"),
    (b"fine\n\xff\xfe bad\n", 2, "not UTF-8"),
    (b"good\nr2d2\n", 2, "cannot be spelled"),
    (b"\xe6\x97\xa5\xe6\x9c\xac\n", 1, "cannot be spelled"),
    (b"jessica -1\n", 1, "must be > 0"),
    (b"jessica 0\n", 1, "must be > 0"),
    (b"jessica 1e999\n", 1, "must be > 0"),
    (b"ok\njessica 3.0.1\n", 2, "bad boost"),
])
def test_a_bad_list_is_one_clear_error(tmp_path: Path, content: bytes, line: int | None, reason: str) -> None:
    path = tmp_path / "hot.txt"
    path.write_bytes(content)
    with pytest.raises(HotwordError, match=reason) as caught:
        read_hotwords(path, CHAR)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path}:" if line is None else f"{path}:{line}:")


@pytest.mark.parametrize("main", [stream.main, transcribe.main, evaluate.main])
def test_the_tools_refuse_a_bad_list_in_one_line(tmp_path: Path, capsys, main, speech_wav: Path) -> None:
    hot = tmp_path / "hot.txt"
    hot.write_text("jessica pemberton\nC3PO\n")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"audio": "%s", "duration": 2.0, "text": "THE QUICK BROWN FOX"}\n' % speech_wav)
    source = {stream.main: ["--file", str(speech_wav)], transcribe.main: [str(speech_wav)],
              evaluate.main: ["--manifest", str(manifest)]}[main]
    assert main([*source, "--hotwords", str(hot), "--backend", "onnx"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(f"error: {hot}:2: 'C3PO' cannot be spelled with the model's units "
                                             "('3'; write numbers as words)")


def test_hotwords_need_the_beam_search(tmp_path: Path, capsys, speech_wav: Path) -> None:
    hot = tmp_path / "hot.txt"
    hot.write_text("okonkwo\n")
    assert transcribe.main([str(speech_wav), "--greedy", "--hotwords", str(hot), "--backend", "onnx"]) == 1
    assert "--hotwords needs the beam search" in capsys.readouterr().err


def spoken(text: str, confusions: dict[str, dict[str, float]]) -> np.ndarray:
    """Frames spelling `text` ("|" between words), a blank after each letter; `confusions` replaces
    the frame of a letter (by its position in `text`) with a less certain one."""
    frames = []
    for i, char in enumerate(text.replace(" ", "|")):
        frames += [confusions.get(str(i), {char: 0.8}), {"<blank>": 0.8}]
    return emissions(CHAR, frames)


@pytest.fixture()
def toy_lm(tmp_path: Path) -> WordLM:
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(CORPUS))
    return WordLM(CHAR, arpa, BeamConfig(beam_size=128, lm_weight=1.0))


def test_a_listed_word_outside_the_lexicon_is_emitted_and_never_otherwise(toy_lm: WordLM) -> None:
    # "ZORBLAX" is no lexicon word; its first letter is heard as "C" nearly as well as "Z"
    logprobs = spoken("THE ZORBLAX SAT", {"4": {"Z": 0.45, "C": 0.4}})
    plain = Decoder(CHAR, toy_lm)
    assert "ZORBLAX" not in plain.text(plain.decode(logprobs)).split()
    biased = plain.with_hotwords(parse_hotwords(["zorblax"], "x", CHAR))
    assert biased.text(biased.decode(logprobs)) == "THE ZORBLAX SAT"
    other = plain.with_hotwords(parse_hotwords(["quintessence"], "x", CHAR))  # an unrelated list changes nothing here
    assert other.text(other.decode(logprobs)) == plain.text(plain.decode(logprobs))
    assert plain.text(plain.decode(logprobs)) == Decoder(CHAR, toy_lm).text(Decoder(CHAR, toy_lm).decode(logprobs))


def test_a_boost_favours_a_lexicon_word_and_a_broken_phrase_keeps_no_bonus(toy_lm: WordLM) -> None:
    logprobs = spoken("THE DOG RAN", {"4": {"D": 0.42, "C": 0.4}, "5": {"O": 0.42, "A": 0.4},
                                      "6": {"G": 0.42, "T": 0.4}})
    plain = Decoder(CHAR, toy_lm)
    assert plain.text(plain.decode(logprobs)) == "THE CAT RAN"  # the LM prefers CAT after THE
    assert plain.with_hotwords([Hotword(("CAT",), 5.0), Hotword(("DOG",), 5.0)]).lm is toy_lm
    favoured = plain.with_hotwords([Hotword(("DOG",), 5.0)])
    assert favoured.text(favoured.decode(logprobs)) == "THE DOG RAN"
    # "DOG HOME" is listed: "DOG" earns its bonus only while the phrase may go on, and loses it at "RAN"
    phrase = plain.with_hotwords([Hotword(("DOG", "HOME"), 5.0)])
    assert phrase.text(phrase.decode(logprobs)) == "THE CAT RAN"


def test_an_empty_list_decodes_exactly_as_no_list(toy_lm: WordLM) -> None:
    """The biasing LM goes through its own states; it must merge exactly the hypotheses the plain search
    merges, so on noisy frames (many rival word histories) an empty list changes no token."""
    rng = np.random.default_rng(0)
    plain = Decoder(CHAR, toy_lm)
    empty = plain.with_hotwords([])
    assert empty.biasing is not None
    for _ in range(10):
        scores = rng.normal(size=(60, len(CHAR.units()))) * 2.0
        logprobs = (scores - np.logaddexp.reduce(scores, axis=1, keepdims=True)).astype(np.float32)
        assert empty.decode(logprobs) == plain.decode(logprobs)


def test_searches_stream_the_same_with_hotwords(toy_lm: WordLM) -> None:
    logprobs = spoken("THE ZORBLAX SAT", {"4": {"Z": 0.45, "C": 0.4}})
    biased = Decoder(CHAR, toy_lm).with_hotwords(parse_hotwords(["zorblax 8"], "x", CHAR))
    search = biased.search(offset=10)
    for start in range(0, len(logprobs), 5):
        search.push(logprobs[start:start + 5])
    assert search.final() == biased.decode(logprobs, offset=10)


def _say(text: str, path: Path, voice: str) -> Path:
    if not shutil.which("espeak-ng"):
        pytest.skip("espeak-ng is not installed")
    subprocess.run(["espeak-ng", "-v", voice, "-w", str(path), text], check=True, capture_output=True)
    return path


@pytest.mark.skipif(default_model_path() is None or default_lm_path() is None, reason="no bundled model and LM")
def test_real_speech_a_listed_name_is_recognised(tmp_path: Path, capsys) -> None:
    """espeak-ng's en-us+m3 (a training voice) says a surname outside the bundled LM's 206k words: the bundled
    model and LM never output it, and do with the name listed (through asr.transcribe, as a user would)."""
    wav = _say("the meeting with jessica zelnikova is at noon", tmp_path / "name.wav", "en-us+m3")
    hot = tmp_path / "names.txt"
    hot.write_text("jessica zelnikova 12\n")
    assert transcribe.main([str(wav), "--backend", "onnx", "--plain"]) == 0
    assert "ZELNIKOVA" not in capsys.readouterr().out.split()
    assert transcribe.main([str(wav), "--backend", "onnx", "--plain", "--hotwords", str(hot)]) == 0
    assert "JESSICA ZELNIKOVA" in capsys.readouterr().out
    hot.write_text("Jessica Zelnikova 12\n")  # restored finals keep the list's casing
    assert transcribe.main([str(wav), "--backend", "onnx", "--hotwords", str(hot)]) == 0
    assert "Jessica Zelnikova" in capsys.readouterr().out


def test_a_listed_word_below_the_minimum_confidence_gives_the_unlisted_final(toy_lm: WordLM) -> None:
    """THE DOG RAN is heard as DOG only a little better than CAT: listed, DOG comes out, with a middling
    confidence. A minimum below it keeps the listed final; one above it gives the final without the list."""
    logprobs = spoken("THE DOG RAN", {"4": {"D": 0.42, "C": 0.4}, "5": {"O": 0.42, "A": 0.4},
                                      "6": {"G": 0.42, "T": 0.4}})
    listed = Decoder(CHAR, toy_lm).with_hotwords([Hotword(("DOG",), 5.0)])
    search = listed.search()
    search.push(logprobs)
    tokens, words = listed.finish(search, 0.04, logprobs)
    assert listed.text(tokens) == "THE DOG RAN"
    dog = words[1].confidence
    assert 0.2 < dog < 0.8 and all(w.confidence > dog for w in (words[0], words[2]))
    for minimum, expected in ((dog - 0.05, "THE DOG RAN"), (dog + 0.05, "THE CAT RAN")):
        strict = Decoder(CHAR, toy_lm, hotword_min_confidence=minimum).with_hotwords([Hotword(("DOG",), 5.0)])
        search = strict.search()
        search.push(logprobs)
        tokens, words = strict.finish(search, 0.04, logprobs)
        assert strict.text(tokens) == expected and [w.word for w in words] == expected.split()


def test_the_minimum_confidence_flag_is_checked(capsys, speech_wav: Path) -> None:
    with pytest.raises(SystemExit):
        transcribe.main([str(speech_wav), "--hotword-min-confidence", "1.5"])
    assert "must be between 0 and 1" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        Decoder.load(CHAR, None, hotword_min_confidence=-0.1)
