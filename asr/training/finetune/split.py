"""The held-out test split of a fine-tune: the recordings scored before and after, never trained on.

`split_rows` holds out whole speakers where there are several (the model is then scored on voices it was not
fine-tuned on), else single recordings; seeded, so the same data splits the same way. `given_split` tests on
the --test recordings instead. Either is refused (`SplitError`) when the test side is too small to show a
change of a few points of WER, or nothing is left to train on. `repeated_sentences` counts the test
transcripts that the training text also holds (the word LM is built from it). No torch.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from asr.text.normalize import normalize

MIN_TEST_UTTERANCES = 10  # fewer cannot show a change of a few points of WER


class SplitError(ValueError):
    """Data that cannot be split into a training and a test set worth measuring; one line."""


@dataclass
class Split:
    """The manifest rows to fine-tune on and those held out to score on."""

    train: list[dict]
    test: list[dict]
    by: str  # "speaker", "recording" or "given" (--test MANIFEST)

    def describe(self) -> str:
        speakers = {row.get("speaker", "") for row in self.test} - {""}
        held = {"speaker": f"{len(speakers)} speaker{'s' * (len(speakers) != 1)} held out",
                "recording": "recordings held out", "given": "the --test recordings"}[self.by]
        return (f"train {len(self.train)} utterances ({minutes(self.train):.1f} min), "
                f"test {len(self.test)} ({minutes(self.test):.1f} min; {held})")


def minutes(rows: list[dict]) -> float:
    """The minutes of audio in these manifest rows."""
    return sum(row["duration"] for row in rows) / 60


def split_rows(rows: list[dict], by: str = "auto", share: float = 0.2, seed: int = 0) -> Split:
    """Hold out about `share` of the utterances: by whole speakers (by="speaker", or "auto" where there are
    two or more), else by recording. SplitError when either side would be too small to use."""
    speakers = sorted({row.get("speaker", "") for row in rows})
    if by == "auto":
        by = "speaker" if len(speakers) >= 2 else "recording"
    rng = random.Random(seed)
    if by == "speaker":
        if len(speakers) < 2:
            raise SplitError("--test-split speaker needs two or more speakers; these recordings have "
                             f"{len(speakers)} (use --test-split recording)")
        rng.shuffle(speakers)
        held: set[str] = set()
        for speaker in speakers[:-1]:  # at least one speaker stays for training
            if sum(row.get("speaker", "") in held for row in rows) >= share * len(rows):
                break
            held.add(speaker)
        test_index = {i for i, row in enumerate(rows) if row.get("speaker", "") in held}
    elif by == "recording":
        order = list(range(len(rows)))
        rng.shuffle(order)
        test_index = set(order[:round(share * len(rows))])
    else:
        raise SplitError(f"--test-split {by!r}: must be auto, speaker or recording")
    split = Split([r for i, r in enumerate(rows) if i not in test_index],
                  [r for i, r in enumerate(rows) if i in test_index], by)
    check_split(split)
    return split


def given_split(train: list[dict], test: list[dict], out_dir: Path) -> Split:
    """The rows of DATA for training and those of --test MANIFEST for testing; a recording in both is
    trained on nowhere (it stays in the test)."""
    tested = {(out_dir / row["audio"]).resolve() for row in test}
    split = Split([row for row in train if (out_dir / row["audio"]).resolve() not in tested], test, "given")
    check_split(split)
    return split


def check_split(split: Split) -> None:
    """SplitError when the test side is too small to measure a change, or nothing is left to train on."""
    if len(split.test) < MIN_TEST_UTTERANCES:
        raise SplitError(f"only {len(split.test)} test utterances held out ({split.by}): at least "
                         f"{MIN_TEST_UTTERANCES} are needed to measure what fine-tuning gains; record more, "
                         "raise --test-share, or give a --test MANIFEST")
    if not split.train:
        raise SplitError("no utterance is left to fine-tune on once the test split is held out")


def repeated_sentences(split: Split) -> int:
    """How many test utterances say a sentence that a training utterance also says (normalised text): the
    word LM, built from the training text, has then seen them, and so has the model."""
    trained = {normalize(row["text"]) for row in split.train}
    return sum(normalize(row["text"]) in trained for row in split.test)
