"""python -m asr.training.g2p --lexicon LEXICON --out DIR: train the G2P on a lexicon and score it on held-out words
(asr/training/g2p/train.py)."""
import sys

from asr.training.g2p.train import main

sys.exit(main())
