"""The normaliser and the tokenizers."""
import pytest

from asr.text.normalize import comparable, normalize, number_to_words
from asr.text.tokenizer import BLANK, Tokenizer


@pytest.mark.parametrize("raw, expected", [
    ("Don\u2019t   stop, 2 go!", "DON'T STOP TWO GO"),
    ("In 1,905 A.D. caf\u00e9 & 42%", "IN ONE THOUSAND NINE HUNDRED FIVE A D CAFE AND FORTY TWO PERCENT"),
    ("'Tis the dogs' bone -- \"yes\"", "TIS THE DOGS BONE YES"),
    ("ZERO THREE FIVE", "ZERO THREE FIVE"), ("", "")])
def test_normalize(raw, expected):
    assert normalize(raw) == expected


@pytest.mark.parametrize("raw, expected", [
    ("Would Mr. Thornton come?", "WOULD MISTER THORNTON COME"), ("Mrs Brown", "MISSUS BROWN"),
    ("Dr. Watson and St. Paul", "DOCTOR WATSON AND SAINT PAUL"), ("lived in Baker St.", "LIVED IN BAKER STREET"),
    ("MR THORNTON", "MISTER THORNTON"), ("MRS DR ST", "MISSUS DOCTOR SAINT"),
    ("published _Mr. Sludge, the Medium_", "PUBLISHED MISTER SLUDGE THE MEDIUM"),  # italics in a Gutenberg book
    ("the 1st street", "THE FIRST STREET"), ("Mrsa and strd", "MRSA AND STRD"), ("_1st Q_.", "FIRST Q")])
def test_titles_normalise_to_the_words_said(raw, expected):
    assert normalize(raw) == expected


def test_a_reference_and_a_hypothesis_agree_whichever_way_a_title_is_spelled():
    for ref, hyp in [("Mr. Thornton", "MISTER THORNTON"), ("MISTER THORNTON", "MR THORNTON"),
                     ("MISSUS BROWN", "MRS BROWN"), ("In 1840, he", "IN EIGHTEEN FORTY HE")]:
        assert normalize(ref) == normalize(hyp) == normalize(normalize(hyp))


@pytest.mark.parametrize("raw, expected", [
    ("In 1840, he", "IN EIGHTEEN FORTY HE"), ("in 1465.", "IN FOURTEEN SIXTY FIVE"), ("1905", "NINETEEN OH FIVE"),
    ("by 1600 AD", "BY SIXTEEN HUNDRED AD"), ("the 1920s", "THE NINETEEN TWENTIES"),
    ("the 21st, 2nd and 40th", "THE TWENTY FIRST SECOND AND FORTIETH")])
def test_years_and_ordinals_normalise_as_readers_say_them(raw, expected):
    assert normalize(raw) == expected


@pytest.mark.parametrize("raw, expected", [
    ("42", "FORTY TWO"), ("1,500 men", "ONE THOUSAND FIVE HUNDRED MEN"), ("1000", "ONE THOUSAND"),
    ("1066", "ONE THOUSAND SIXTY SIX"), ("2005", "TWO THOUSAND FIVE"), ("12345", "TWELVE THOUSAND THREE HUNDRED FORTY FIVE"),
    ("3 to 7", "THREE TO SEVEN"), ("Street", "STREET")])
def test_other_numbers_normalise_as_before(raw, expected):
    assert normalize(raw) == expected


@pytest.mark.parametrize("raw, expected", [
    ("\u00a3300,000 for", "THREE HUNDRED THOUSAND POUNDS FOR"), ("$1", "ONE DOLLAR"), ("$25", "TWENTY FIVE DOLLARS"),
    ("$2.50", "TWO DOLLARS FIFTY CENTS"), ("\u00a32.50", "TWO POUNDS FIFTY PENCE"), ("$2.00", "TWO DOLLARS"),
    ("$3 million", "THREE MILLION DOLLARS"), ("$1.5 million", "ONE POINT FIVE MILLION DOLLARS"),
    ("\u20ac5", "FIVE EUROS"), ("50\u00a2", "FIFTY CENTS"), ("1.5", "ONE POINT FIVE"),
    ("3.14 and 1,234.5", "THREE POINT ONE FOUR AND ONE THOUSAND TWO HUNDRED THIRTY FOUR POINT FIVE")])
def test_money_and_decimals_normalise_as_said(raw, expected):
    assert normalize(raw) == expected


def test_the_written_forms_money_and_numbers_score_as_the_words_said():
    """What the written form writes for recognised words scores as those words: the currency is not lost, and
    "a hundred and eight" (written 108) matches."""
    from asr.corpus.scoring import score  # noqa: PLC0415
    for said, written in [("THREE HUNDRED THOUSAND POUNDS", "\u00a3300,000"), ("A THOUSAND MEN", "1,000 men"),
                          ("A HUNDRED AND EIGHT RUFFIANS", "108 ruffians"), ("TWO DOLLARS AND FIFTY CENTS", "$2.50")]:
        words, _, _ = score(normalize(said), normalize(written))
        assert words.errors == 0, (said, written)
    assert comparable("HUNDREDS AND THOUSANDS AND A HUNDRED AND THE") == ("HUNDREDS AND THOUSANDS AND ONE HUNDRED "
                                                                          "AND THE")
    words, _, _ = score(normalize("A HUNDRED AND EIGHT"), normalize("109"))
    assert words.errors == 1


def test_number_words():
    assert number_to_words(0) == "ZERO"
    assert number_to_words(115) == "ONE HUNDRED FIFTEEN"
    assert number_to_words(2_000_019) == "TWO MILLION NINETEEN"


@pytest.mark.parametrize("kind", ["bpe", "char"])
def test_tokenizer_round_trip_and_serialisation(kind):
    texts = [normalize(t) for t in ["the cat sat on the mat", "a dog ran far away", "we call it bear",
                                    "zero three five one", "she sells sea shells"] * 20]
    tok = Tokenizer.train(texts, kind, vocab_size=40)
    again = Tokenizer.from_bytes(tok.to_bytes())
    for text in texts[:5]:
        ids = tok.encode(text)
        assert BLANK not in ids
        assert again.encode(text) == ids
        assert again.decode(ids) == text
    boundary = tok.encode("THE CAT")[0 if kind == "bpe" else 3]  # "▁THE" or the "|" unit
    assert tok.starts_word(boundary)
    assert not tok.starts_word(tok.encode("THE CAT")[-1])


@pytest.mark.parametrize("kind", ["bpe", "char"])
def test_word_times_from_token_frames(kind):
    from asr.decoding.ctc import Token, word_times
    tok = Tokenizer.train([normalize("the cat sat on the mat")] * 50, kind, vocab_size=30)
    tokens = [Token(i, 10 + 3 * n) for n, i in enumerate(tok.encode("THE CAT"))]
    words = word_times(tokens, tok, frame_seconds=0.04)
    assert [w.word for w in words] == ["THE", "CAT"]
    assert words[0].start == pytest.approx(0.4) and words[1].end == pytest.approx((tokens[-1].frame + 1) * 0.04)
    assert words[0].end <= words[1].start
