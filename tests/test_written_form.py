"""The written form on recognition output (issue 79): the recognizer's upper-case words without punctuation, cut
into finals at endpoints, come out with titles as written ("Mr. Thornton"), years in figures, no final ending in
a comma, and no capital for a word that continues a sentence across a cut."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from asr.decoding.ctc import GreedySearch, Word
from asr.decoding.decoder import Decoder
from asr.decoding.endpoint import EndpointConfig, Segmenter
from asr.text.restore.context import Context, final_labels
from asr.text.restore.labels import CAPITAL, COMMA, LOWER, NONE, PERIOD, render
from asr.text.restore.restorer import Restorer, bundled_restorer
from asr.text.restore.titles import titled
from asr.text.tokenizer import Tokenizer

CHAR = Tokenizer("char")  # the restorer works on words: any model's units will do


@pytest.fixture(scope="module")
def decoder() -> Decoder:
    if bundled_restorer() is None:
        pytest.skip("no restorer is bundled")
    return Decoder.load(CHAR, lm=None)  # the bundled restorer and the written form, as finals get them


def scripted(labels: dict[str, tuple[int, int]]) -> Restorer:
    """A restorer that gives each word the (case, mark) of `labels` (others: lower case, no mark) and, as the
    network does, a capital to the first word it reads, to check the rules on top of it."""
    vocab = ["<pad>", "<unk>", *labels]
    table = [(LOWER, NONE), (LOWER, NONE), *labels.values()]

    def run(ids: np.ndarray, pauses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cases, marks = np.zeros((*ids.shape, 3), np.float32), np.zeros((*ids.shape, 5), np.float32)
        for j, i in enumerate(ids[0]):
            cases[0, j, CAPITAL if j == 0 else table[i][0]] = marks[0, j, table[i][1]] = 1.0
        return cases, marks
    return Restorer(vocab, run, "scripted", Path("scripted"))


def timed(text: str, end: float) -> list[Word]:
    """The recognizer's words of a final, 0.1 s apart, the last ending at `end`."""
    words = text.split()
    return [Word(w, end - 0.1 * (len(words) - 1 - i) - 0.08, end - 0.1 * (len(words) - 1 - i), 0.9)
            for i, w in enumerate(words)]


@pytest.mark.parametrize("plain, written", [
    ("WOULD MISTER THORNTON COME", "Would Mr. Thornton come"),
    ("WOULD MR THORNTON COME", "Would Mr. Thornton come"),  # the spelling of the LM built before MISTER
    ("MISTER THORNTON MET TWO THOUSAND FIVE HUNDRED PEOPLE", "Mr. Thornton met 2,500 people."),
    ("MISSUS BROWN CAME HOME", "Mrs. Brown came home"),
    ("ASK DOCTOR SMITH", "Ask Dr. Smith"),
    ("WE PRAYED TO SAINT JOHN", "We prayed to St. John"),
    ("HER DOCTOR SAID", "Her doctor said"),  # a doctor, not a title
])
def test_titles_keep_their_period_and_the_name_its_capital(decoder: Decoder, plain: str, written: str) -> None:
    assert decoder.restore(plain).startswith(written)


def test_title_rules_on_the_restorers_labels() -> None:
    words = "THE DOCTOR SAW MISTER THORNTON AND SAINT PAUL".split()
    cases = [CAPITAL, LOWER, LOWER, LOWER, LOWER, LOWER, LOWER, CAPITAL]
    marks = [NONE, NONE, NONE, PERIOD, NONE, NONE, NONE, PERIOD]  # the restorer ended a sentence after MISTER
    spelled = titled(words, cases, marks)
    assert render(words, cases, marks, spelled) == "The doctor saw Mr. Thornton and St. Paul."
    hey = ["HEY", "MISTER"]
    assert titled(hey, [CAPITAL, LOWER], [NONE, PERIOD]) == [None, None]  # nothing follows: a word
    assert titled(hey, [CAPITAL, LOWER], [NONE, NONE], more=True) == [None, "Mr."]  # the next final may


def test_a_title_before_a_cut_capitalises_the_name_after_it(decoder: Decoder) -> None:
    context = Context()
    assert decoder.restore("WOULD MISTER", timed("WOULD MISTER", 1.0), context, after=0.5) == "Would Mr."
    assert decoder.restore("THORNTON COME", timed("THORNTON COME", 2.0), context).startswith("Thornton come")


@pytest.mark.parametrize("plain, written", [
    ("IN FOURTEEN SIXTY FIVE THE KING DIED", "In 1465 the"),
    ("IT WAS BUILT IN NINETEEN NINETY NINE", "It was built in 1999"),
    ("HE DIED IN EIGHTEEN FORTY", "He died in 1840"),
])
def test_years_said_in_pairs_are_written_in_figures(decoder: Decoder, plain: str, written: str) -> None:
    assert decoder.restore(plain).startswith(written)


def test_a_final_never_ends_in_a_comma() -> None:
    restorer = scripted({"HOWEVER": (CAPITAL, COMMA), "COLD": (LOWER, COMMA)})
    for after in (0.0, 0.45):  # cut at its longest, or at a pause
        assert final_labels(restorer, ["HOWEVER"], [(0.0, 0.3)], Context(), after)[1] == [NONE]
    assert final_labels(restorer, ["IT", "WAS", "COLD"])[1] == [NONE, NONE, PERIOD]  # the stream's last: an end


def test_the_endpoint_decides_a_sentence_end_where_the_restorer_gives_no_mark() -> None:
    restorer = scripted({"THE": (LOWER, PERIOD)})
    assert final_labels(restorer, ["IT", "WAS", "COLD"], after=0.45)[1][-1] == PERIOD  # a pause after it
    assert final_labels(restorer, ["IT", "WAS", "COLD"], after=0.0)[1][-1] == NONE  # cut at its longest
    assert final_labels(restorer, ["WE", "SAW", "THE"], after=0.45)[1][-1] == NONE  # no sentence ends on "the"


def test_a_cut_inside_a_sentence_does_not_capitalise_the_next_final() -> None:
    restorer = scripted({"HOWEVER": (CAPITAL, COMMA), "MARY": (CAPITAL, NONE), "HOME": (LOWER, PERIOD)})
    context = Context()
    first = final_labels(restorer, ["HOWEVER"], [(0.0, 0.3)], context, after=0.5)
    assert (first[:2], context.ended) == (([CAPITAL], [NONE]), False)
    assert final_labels(restorer, ["THEY", "WENT", "HOME"], None, context, after=0.5)[0] == [LOWER, LOWER, LOWER]
    assert context.ended  # "home." ended it: the next final starts a sentence
    assert final_labels(restorer, ["WE", "LEFT"], None, context, after=0.5)[0][0] == CAPITAL
    context = Context(["AND", "THEN"], [], ended=False)
    assert final_labels(restorer, ["MARY", "LEFT"], None, context)[0][0] == CAPITAL  # a name keeps its capital


class Scripted(Decoder):
    """The bundled restorer and written form on finals given as the recognizer's plain words, one a segment."""

    def __init__(self, finals: list[str], decoder: Decoder):
        super().__init__(CHAR, restorer=decoder.restorer, written=decoder.written)
        self.finals = iter(finals)

    def search(self, offset: int = 0, before=()) -> GreedySearch:
        return GreedySearch(offset)

    def finish(self, search, frame_seconds: float, logprobs=None, offset: int = 0, *_) -> tuple[str, list[Word]]:
        text = next(self.finals)
        return text, timed(text, (offset + 31) * frame_seconds)  # said before the segment's one token frame

    def text(self, tokens) -> str:
        return tokens


def stream_finals(decoder: Decoder, finals: list[str]) -> list[str]:
    """The finals' texts as a stream emits them: each segment 30 frames of blank, a token, then silence that
    ends it (0.4 s), the last one ended by the end of input."""
    segmenter = Segmenter(Scripted(finals, decoder), 0.04, EndpointConfig(trailing_silence=0.4))
    blank, token = np.array([[0.0, -20, -20, -20]], np.float32), np.array([[-20, 0.0, -20, -20]], np.float32)
    texts = []
    for i in range(len(finals)):
        tail = 2 if i == len(finals) - 1 else 13
        frames = np.concatenate([np.repeat(blank, 30, 0), token, np.repeat(blank, tail, 0)])
        texts += [e.text for e in segmenter.push(frames, 0.0, partial=False)]
    return texts + [e.text for e in segmenter.finish(0.0)]


def test_finals_of_a_stream_cut_inside_a_sentence(decoder: Decoder) -> None:
    texts = stream_finals(decoder, ["HOWEVER", "THEY WENT TO THE", "MARKET AND BOUGHT SOME BREAD",
                                    "WOULD MISTER", "THORNTON COME", "IN FOURTEEN SIXTY FIVE THE KING DIED"])
    assert not any(text.endswith(",") for text in texts), texts
    assert texts[:3] == ["However", "they went to the", "market and bought some bread."], texts
    assert texts[3] == "Would Mr." and texts[4].startswith("Thornton come"), texts
    assert texts[5].startswith("In 1465 the") and texts[5].endswith("."), texts
