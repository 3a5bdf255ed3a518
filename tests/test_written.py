"""The written form of finals: numbers, money, times and years in figures; --spoken-form keeps the words."""
from __future__ import annotations

import pytest

from asr.decoding.decoder import Decoder
from asr.server.protocol import INVALID, ProtocolError, Start, parse_text
from asr.text.tokenizer import Tokenizer
from asr.text.written import WrittenForm

WRITTEN = WrittenForm()


@pytest.mark.parametrize("spoken, written", [
    ("I paid twenty five dollars at three thirty.", "I paid $25 at 3:30."),
    ("We met at ten forty five a. m. on March fifth.", "We met at 10:45 a.m. on March 5."),  # the restorer's "a. m."
    ("Prices rose by three point five percent in nineteen ninety nine.", "Prices rose by 3.5% in 1999."),
    ("Two thousand and five hundred people came.", "2,500 people came."),  # damga 1.0.5 wrote "2005 hundred"
    ("See you at eleven forty five p. m.", "See you at 11:45 p.m."),  # ... and "11:40 5 p.m."
    ("Two of them came back, no one else.", "Two of them came back, no one else."),  # below ten: words
    ("Where are you going to keep it?", "Where are you going to keep it?"),  # no number: untouched
    ("It opens on the twenty first of June at half past three.", "It opens on the 21st of June at half past three."),
    ("They came at the eleventh hour, on the fourth of July.", "They came at the eleventh hour, on the fourth of July."),
    ("In fourteen sixty five the king died.", "In 1465 the king died."),  # damga wrote 1999, not 1465
    ("In thirteen oh five there were sixteen hundred men.", "In 1305 there were 1600 men."),
    ("It cost fifteen hundred dollars.", "It cost $1,500."),  # money, not a year
    ("He was fourteen, at eleven forty five.", "He was 14, at 11:45."),  # a teen alone, and a time
])
def test_numbers_are_written_as_people_write_them(spoken: str, written: str) -> None:
    assert WRITTEN(spoken) == written


def test_a_long_final_is_converted_window_by_window() -> None:
    filler = "and then we walked along the river for a while " * 5
    text = f"It cost twenty dollars {filler}until nine fifteen p. m. in twenty twenty four."
    assert WRITTEN(text) == f"It cost $20 {filler}until 9:15 p.m. in 2024."


def test_the_decoder_writes_restored_finals_unless_spoken_form() -> None:
    tokenizer = Tokenizer("char")  # the restorer works on words: any model's units will do
    decoder = Decoder.load(tokenizer, lm=None)  # the bundled restorer: cased, punctuated, then written
    assert decoder.written is not None
    assert decoder.restore("I PAID TWENTY FIVE DOLLARS") == "I paid $25."
    assert decoder.spoken().restore("I PAID TWENTY FIVE DOLLARS") == "I paid twenty five dollars."
    assert Decoder.load(tokenizer, lm=None, written=False).written is None
    assert Decoder.load(tokenizer, lm=None, restorer=None).restore("I PAID TWENTY FIVE DOLLARS") is None  # --plain


def test_a_stream_may_ask_for_the_spoken_form() -> None:
    assert parse_text('{"spoken_form": true}', True) == Start(16000, (), True)
    assert parse_text('{"sample_rate": 8000}', True).spoken_form is False
    with pytest.raises(ProtocolError, match="spoken_form must be true or false") as caught:
        parse_text('{"spoken_form": "yes"}', True)
    assert caught.value.code == INVALID
