"""The restorer's files, as both of its runtimes read them: the format names, the unknown word's id, the error.

The network (`asr.text.restore.model`, torch) writes them and the runtime (`asr.text.restore.restorer`, which
runs either backend) reads them, so what both need lives here, below both.
"""
from __future__ import annotations

FORMAT = "asr-restorer-v1"  # ids only
FORMAT_PAUSES = "asr-restorer-v2"  # ids and the pause before each word
FORMATS = (FORMAT, FORMAT_PAUSES)
UNKNOWN = 1  # the id of a word outside the vocabulary (0 pads)


class RestorerError(ValueError):
    """A restorer file that cannot be used; the message names the file and the reason."""
