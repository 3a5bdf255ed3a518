"""python -m asr.training.lm --out lm.arpa TEXT_OR_MANIFEST...: the word n-gram LM of training text, as ARPA
(asr/training/lm/build.py)."""
import sys

from asr.training.lm.build import main

sys.exit(main())
