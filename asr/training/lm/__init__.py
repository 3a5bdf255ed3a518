"""The word LMs: the n-gram LM of the beam search (`python -m asr.training.lm`, `build.py` over `ngram.py` and
`kneser_ney.py`; `mix.py`, `book_text.py`), its weights tuned on a dev set (`tune.py`), and the second pass's
neural LM (`neural.py`)."""
