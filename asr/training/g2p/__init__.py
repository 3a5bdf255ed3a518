"""The pronunciation lexicon (`lexicon.py`, from CMUdict) and the G2P trained on it for the words it lacks
(`python -m asr.training.g2p`, `train.py`)."""
