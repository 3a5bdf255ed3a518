"""The endpoint rules: a pause ends a segment sooner where the word LM lets the sentence end there
(asr.decoding.endpoint_rules, asr.decoding.sentence_end), on synthetic log-prob streams."""
from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from asr import cli
from asr.decoding.beam import BeamConfig, WordLM
from asr.decoding.ctc import Token
from asr.decoding.decoder import Decoder
from asr.decoding.endpoint import EndpointConfig, Segmenter
from asr.decoding.endpoint_rules import end_frame
from asr.text.restore.context import SENTENCE_PAUSE
from asr.text.tokenizer import Tokenizer
from asr.training.lm.build import build_arpa
from helpers import emissions

FS = 0.04  # seconds an encoder frame
CORPUS = ["THE CAT SAT", "A CAT SAT", "THE DOG SAT", "A DOG SAT", "THE CAT SAT ON THE MAT", "THE DOG RAN"] * 3
RULES = EndpointConfig.by_sentence(sentence_end_silence=0.2, mid_phrase_silence=0.8, sentence_end_logprob=-0.5)
TOKENIZER = Tokenizer("char")


@pytest.fixture(scope="module")
def decoder(tmp_path_factory: pytest.TempPathFactory) -> Decoder:
    arpa = tmp_path_factory.mktemp("lm") / "lm.arpa"
    arpa.write_text(build_arpa(CORPUS))
    return Decoder(TOKENIZER, WordLM(TOKENIZER, arpa, BeamConfig(beam_size=16, lm_weight=1.0)))


def said(*parts: tuple[str, float], sure: float = 0.95) -> np.ndarray:
    """('THE CAT', 0.2) = the letters of THE CAT, a frame each, '|' between words (none after the last, as a model
    trained on sentences puts it), then 0.2 s of blank frames; each frame's unit has probability `sure`."""
    frames = []
    for text, pause in parts:
        text = ("|" if frames else "") + text.replace(" ", "|")  # the words before go on: a separator
        frames += [{c: sure} for c in text] + [{"<blank>": sure}] * round(pause / FS)
    return emissions(TOKENIZER, frames)


def finals(decoder: Decoder, logprobs: np.ndarray, cfg: EndpointConfig = RULES, lookahead: int = 0,
           piece: int = 7) -> list[tuple[str, int]]:
    """The finals (text, end frame) of `logprobs` pushed `piece` frames at a time, then finished."""
    segmenter = Segmenter(decoder, FS, cfg, lookahead)
    now = len(logprobs) * FS  # a final's end is at most the stream's time
    out = [e for i in range(0, len(logprobs), piece) for e in segmenter.push(logprobs[i:i + piece], now)]
    out += segmenter.finish(now)
    return [(e.text, round(e.end / FS)) for e in out if e.is_final]


def test_the_lm_judges_where_a_sentence_can_end(decoder: Decoder) -> None:
    search = decoder.search()
    search.push(said(("THE CAT SAT", 0.2)))
    ended = search.sentence_end()  # SAT: the last word, never followed by the separator, still counts
    search = decoder.search()
    search.push(said(("THE CAT SAT THE", 0.2)))
    assert ended > RULES.sentence_end_logprob > search.sentence_end()
    search = decoder.search()
    search.push(said(("THE CA", 0.2), sure=1 - 1e-6))  # no word of the lexicon: the speaker is mid-word
    assert search.sentence_end() == -math.inf
    assert Decoder(TOKENIZER).search().sentence_end() is None  # greedy: nothing to judge with


def test_a_finished_sentence_ends_after_a_short_pause(decoder: Decoder) -> None:
    logprobs = said(("THE CAT SAT", 1.0), ("A DOG SAT", 1.0))
    assert finals(decoder, logprobs) == [("THE CAT SAT", 11 + 5), ("A DOG SAT", 46 + 5)]  # 0.2 s after each


def test_a_pause_mid_phrase_waits_longer(decoder: Decoder) -> None:
    logprobs = said(("THE CAT SAT ON THE", 0.6), ("MAT", 2.0))
    assert finals(decoder, logprobs) == [("THE CAT SAT ON THE MAT", 18 + 15 + 4 + 5)]  # not cut after THE
    assert finals(decoder, logprobs, EndpointConfig.fixed(0.4))[0] == ("THE CAT SAT ON THE", 18 + 10)  # the old rule
    long_pause = said(("THE CAT SAT ON THE", 1.0), ("MAT", 0.0))
    assert finals(decoder, long_pause)[0] == ("THE CAT SAT ON THE", 18 + 20)  # 0.8 s: mid-phrase, it ends anyway


def test_a_segment_ends_at_its_longest_whatever_the_lm_says(decoder: Decoder) -> None:
    cfg = replace(RULES, max_segment=2.0)
    logprobs = said(*[("THE CAT SAT", 0.12)] * 5)  # 0.12 s pauses: shorter than any rule's
    assert finals(decoder, logprobs, cfg)[0][1] == 50  # 2 s


def test_the_verdicts_do_not_depend_on_how_the_frames_arrive(decoder: Decoder) -> None:
    logprobs = said(("THE CAT SAT", 0.3), ("THE DOG", 0.4), ("RAN", 1.5), ("A CAT SAT", 0.5))
    reference = finals(decoder, logprobs, piece=1)
    assert len(reference) >= 2
    for piece in (3, 12, 500):
        assert finals(decoder, logprobs, piece=piece) == reference


def test_a_pause_must_last_through_the_lookahead_chunk_holding_its_end(decoder: Decoder) -> None:
    """The model computes its lookahead chunk's frames at once: a pause whose end frame comes with speech that
    resumes in the same chunk does not end the segment, which costs nothing, as the frame comes no sooner."""
    logprobs = said(("THE CAT SAT", 0.2), ("A DOG SAT", 1.0))  # SAT's last frame 10, the pause's end 16, | at 16
    assert finals(decoder, logprobs, lookahead=0)[0] == ("THE CAT SAT", 16)
    assert finals(decoder, logprobs, lookahead=12) == [("THE CAT SAT A DOG SAT", 26 + 5)]
    fixed = EndpointConfig.fixed(0.2)  # the rule before: decided at its frame
    assert finals(decoder, logprobs, fixed, lookahead=12)[0] == ("THE CAT SAT", 16)


def test_without_a_word_lm_a_pause_ends_after_the_fixed_silence() -> None:
    tokens, cfg = [Token(5, 3)], EndpointConfig.by_sentence()
    assert end_frame(tokens, 0, 100, cfg, FS) == 3 + 1 + round(cfg.no_lm_silence / FS)
    assert end_frame(tokens, 0, 100, EndpointConfig.fixed(1.2), FS) == 3 + 1 + 30
    greedy = Segmenter(Decoder(TOKENIZER), FS)
    assert greedy.ask is None  # nothing to ask


def test_the_rules_as_options() -> None:
    parser = cli.argparse.ArgumentParser()
    cli.add_endpoint_args(parser)
    assert cli.endpoint_config(parser.parse_args([])) == EndpointConfig()
    cfg = cli.endpoint_config(parser.parse_args(["--sentence-end-silence", "0.3", "--mid-phrase-silence", "1.2"]))
    assert (cfg.sentence_end_silence, cfg.mid_phrase_silence, cfg.trailing_silence) == (0.3, 1.2, None)
    assert cli.endpoint_config(parser.parse_args(["--trailing-silence", "0.5"])) == EndpointConfig.fixed(0.5)
    assert cli.endpoint_config(SimpleNamespace(whole=True)) == EndpointConfig.whole()
    with pytest.raises(ValueError, match="mid-phrase-silence"):
        EndpointConfig(sentence_end_silence=1.0, mid_phrase_silence=0.5).validate()
    with pytest.raises(ValueError, match="sentence-end-logprob"):
        EndpointConfig(sentence_end_logprob=0.5).validate()
    alone = cli.endpoint_config(parser.parse_args(["--words-before", "0", "--mid-sentence", "0"]))
    assert (alone.words_before, alone.mid_sentence) == (0, 0.0)  # each segment a sentence of its own
    for bad in (["--words-before", "-1"], ["--mid-sentence", "1.5"], ["--words-before", "two"]):
        with pytest.raises(SystemExit):
            parser.parse_args(bad)


def test_a_segment_the_lm_let_end_ends_its_sentence_for_the_restorer(decoder: Decoder) -> None:
    """A final's sentence ends after SENTENCE_PAUSE of silence where the restorer put no mark: a segment that
    ended on the word LM's verdict counts as one, though its pause was shorter."""
    pauses = []

    class Recording(Decoder):
        def restore(self, text, words=None, context=None, after=math.inf):
            pauses.append(round(after, 3))
            return None

    recording = Recording(TOKENIZER, decoder.lm)
    finals(recording, said(("THE CAT SAT", 1.0), ("A DOG SAT ON THE", 1.0), ("MAT", 0.0)))
    assert pauses == [SENTENCE_PAUSE, 0.8, math.inf]  # judged an end; cut mid-phrase after 0.8 s; the stream's end
