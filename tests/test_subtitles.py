"""Subtitle cues (SRT, VTT): the endpointer's segments cut at the restorer's sentences, each cue 1-7 s and at most
two lines of 42 characters, as subtitle guides ask; they show the restored text, numbers as written included."""
from __future__ import annotations

import re

import pytest

from asr.decoding.ctc import Word
from asr.text.formats import MAX_CUE_SECONDS, MAX_LINE_CHARS, MIN_CUE_SECONDS, Segment, Transcript, cues
from asr.text.normalize import normalize


def segment(text: str, start: float, plain: str | None = None, word_seconds: float = 0.3,
            gap: float = 0.05) -> Segment:
    """A final: `text` as restored, its plain words (by default the text's, normalised) timed one after another."""
    plain = plain or " ".join(normalize(token) for token in text.split())
    words, at = [], start
    for word in plain.split():
        words.append(Word(word, round(at, 3), round(at + word_seconds, 3), 0.9))
        at += word_seconds + gap
    return Segment(start, words[-1].end + 0.4, text, words, plain)


def transcript(*segments: Segment) -> Transcript:
    return Transcript("x.wav", " ".join(s.text for s in segments), segments[-1].end + 1.0, list(segments))


def check(t: Transcript) -> list[tuple[float, float, str]]:
    """The cues, checked against the guides and the transcript's words."""
    out = cues(t)
    for start, end, text in out:
        lines = text.split("\n")
        assert len(lines) <= 2 and all(len(line) <= MAX_LINE_CHARS for line in lines), text
        assert end - start <= MAX_CUE_SECONDS + 1e-9, (start, end, text)
    assert all(a[1] <= b[0] + 1e-9 for a, b in zip(out, out[1:])), out  # in order, none overlapping
    assert " ".join(text.replace("\n", " ") for _, _, text in out).split() == t.text.split()
    return out


def test_a_sentence_that_fits_is_one_cue_not_twelve_words_and_a_stray_one() -> None:
    """13 words: the old cues cut every 12 words, leaving "tie." alone for 0.24 s."""
    t = transcript(segment("On Sunday he put on his best suit and his favourite blue tie.", 0.5))
    out = check(t)
    assert len(out) == 1 and out[0][2] == "On Sunday he put on his best suit\nand his favourite blue tie."


def test_cues_follow_sentences_and_segments() -> None:
    long = ("The committee met on Thursday to discuss the budget for the coming year, and after a long debate "
            "about the costs of the new building they agreed to postpone the decision until the spring.")
    t = transcript(segment("Hello there. " + long + " Yes.", 0.0),
                   segment("It was very late that night. We went home by train and slept until noon.", 30.0))
    out = check(t)
    texts = [text.replace("\n", " ") for _, _, text in out]
    assert all(end - start >= MIN_CUE_SECONDS for start, end, _ in out), out
    assert "Hello there." not in texts and "Yes." not in texts  # too short alone: they join a neighbour
    assert not any(start < 30.0 < end for start, end, _ in out)  # no cue spans two segments
    assert [text for (start, _, _), text in zip(out, texts) if start >= 30.0] == [
        "It was very late that night.", "We went home by train and slept until noon."]  # a sentence a cue


def test_a_short_final_far_from_others_lasts_a_second_where_there_is_room() -> None:
    t = transcript(segment("Yes.", 1.0), segment("No.", 9.0), segment("Maybe.", 9.9), segment("Well.", 20.0))
    out = check(t)
    assert [text for _, _, text in out] == ["Yes.", "No. Maybe.", "Well."]  # no neighbour within 7 s: alone
    assert all(end - start >= MIN_CUE_SECONDS - 1e-9 for start, end, _ in out), out
    assert out[0][0] == 1.0 and out[1][0] == 9.0


def test_a_final_of_one_short_word_is_no_cue_alone() -> None:
    """Recognition cut "The" off as a final of its own (the endpointer's segment); its cue goes with the nearer
    neighbour (here the next final, 0.3 s on, not the previous, 2 s back), also inside a long run of cues."""
    first = segment("We walked to the station in the rain and waited for the train for an hour.", 0.0)
    the = segment("the", first.words[-1].end + 2.0)
    last = segment("train was late again, so we went home.", the.words[-1].end + 0.3)
    out = check(transcript(first, the, last))
    texts = [text.replace("\n", " ") for _, _, text in out]
    assert not any(len(text.split()) == 1 for text in texts), texts
    assert any(text.startswith("the train was late") for text in texts), texts
    before = segment("It was late, so we went", 0.0)
    alone = check(transcript(before, segment("home.", before.words[-1].end + 0.5)))
    assert [text for _, _, text in alone] == ["It was late, so we went home."]


def test_cues_show_the_written_form() -> None:
    """A final whose numbers are written ("$25", "3:30") has fewer tokens than plain words: its cues show the
    restored text, timed by the words it was written from, not the plain upper-case words."""
    t = transcript(segment("I paid $25 at 3:30.", 2.0, plain="I PAID TWENTY FIVE DOLLARS AT THREE THIRTY"))
    out = check(t)
    assert [text for _, _, text in out] == ["I paid $25 at 3:30."]
    assert out[0][0] == pytest.approx(2.0) and out[0][1] == pytest.approx(t.segments[0].words[-1].end)


def test_srt_and_vtt_write_the_cues(tmp_path) -> None:
    t = transcript(segment("On Sunday he put on his best suit and his favourite blue tie.", 0.5))
    assert t.render("srt") == ("1\n00:00:00,500 --> 00:00:05,000\n"
                               "On Sunday he put on his best suit\nand his favourite blue tie.\n")
    assert re.fullmatch(r"WEBVTT\n\n00:00:00\.500 --> 00:00:05\.000\n.*\n.*\n", t.render("vtt"))
