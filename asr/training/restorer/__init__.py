"""The casing and punctuation restorer of finals (`python -m asr.training.restorer`, `train.py`; its data,
`data.py`)."""
