"""The lexicon trie's inputs, cached as numpy arrays: what `asr.decoding.beam.WordLM` derives from a large LM and a
model's tokenizer before it builds its trie (the LM's words in order, each spelled in the model's units, and each
one's score after <s>) takes seconds for a 200k-word LM (reading the ARPA's unigrams, the G2P for the words the
model's lexicon lacks, scoring every word), and is the same every time for the same LM, tokenizer and lexicon size.

One file per (tokenizer, LM file, lexicon size) under `cache_dir()/lexicon/`, named by a digest of the three: the
tokenizer's `fingerprint` (a digest of the bytes it was loaded from; a tokenizer made in code has none and is
never cached), the LM's path and `lexicon_words`. A phone model searched without a word LM (its greedy decoding)
spells every word of its own lexicon: cached the same way, under `no-lm-`, the fingerprint saying which lexicon.
The file holds the LM's `stamp` (`asr.decoding.lm_binary`) too: an LM rewritten in place is spelled again and its
file replaced, so the cache holds one file per LM path.
Written under a temporary name, so a reader sees the whole file or none.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np

from asr.pretrained import cache_dir, path_key

FORMAT = 1  # bumped when what is stored, or how it is derived, changes
ARRAYS = ("units", "offsets", "labels", "scores", "kept")


def key_path(fingerprint: str, lm: Path | None, lexicon_words: int | None) -> Path:
    """The cache file of this tokenizer, LM file (None: a phone model's search without one, every word of its
    lexicon) and lexicon size."""
    key = hashlib.blake2b(f"{FORMAT}|{fingerprint}|{lexicon_words}".encode(), digest_size=12).hexdigest()
    return cache_dir() / "lexicon" / f"{'no-lm' if lm is None else path_key(lm)}-{key}.npz"


def forget(lm: Path) -> None:
    """Remove every cached lexicon of the LM file `lm` (one about to be deleted: a fine-tune's candidate mixtures)."""
    for path in (cache_dir() / "lexicon").glob(f"{path_key(lm)}-*.npz"):
        path.unlink(missing_ok=True)


def save(path: Path, lm_stamp: str, words: list[str], arrays: dict[str, np.ndarray]) -> None:
    """Store the lexicon's words (in label order) and its entries' `ARRAYS`, made from the LM whose stamp is
    `lm_stamp`; OSError where the cache is unwritable."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = np.frombuffer("\n".join(words).encode("utf-8"), np.uint8)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".lexicon-", suffix=".npz", delete=False) as f:
        np.savez(f, stamp=np.array(lm_stamp), words=text, **{name: arrays[name] for name in ARRAYS})
    os.replace(f.name, path)


def load(path: Path, lm_stamp: str) -> tuple[list[str], dict[str, np.ndarray]] | None:
    """The words and arrays `save` stored at `path`, or None where there is no usable file or it was made from
    another LM than the one whose stamp is `lm_stamp`."""
    try:
        with np.load(path) as stored:
            if str(stored["stamp"]) != lm_stamp:
                return None
            words = stored["words"].tobytes().decode("utf-8").split("\n")
            arrays = {name: stored[name] for name in ARRAYS}
    except (OSError, ValueError, KeyError, UnicodeDecodeError):
        return None
    if len(arrays["offsets"]) != len(arrays["labels"]) + 1 or len(arrays["scores"]) != len(arrays["labels"]):
        return None
    return words, arrays
