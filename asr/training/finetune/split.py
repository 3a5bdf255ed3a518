"""Fine-tuning a trained model on a small corpus of your own: the data and the held-out split.

`python -m asr.finetune` (asr/finetune.py) runs the steps; this module and `finetune_recipe` hold what
they decide (this one without torch, so checking the data is quick):

- `input_rows`: manifest rows for DATA (a folder of audio with transcripts beside it, a CSV/TSV table, or a
  manifest), built and checked by the rules of `python -m asr.manifest` (asr/corpus/build.py), which reports what
  it leaves out one line each.
- `split_rows`: a held-out test split: whole speakers where there are several (the model is then scored on
  voices it was not fine-tuned on), else single recordings; seeded, so the same data splits the same way.
- `replay_rows`: a share of the original training mixture (speechocean762, LibriSpeech, FSDD manifests under
  a data root, where they are), mixed into every epoch so the model keeps general speech.
- `asr.training.finetune_recipe`: the small-data recipe as a training config.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from asr.corpus.build import DELIMITERS, BuildError, Report, folder_rows, manifest_row, table_rows
from asr.corpus.manifest import read_manifest, relative_audio

MIN_TEST_UTTERANCES = 10  # fewer cannot show a change of a few points of WER
LR = 3.0e-4  # the recipe's peak learning rate: a fifth of the first training's, so the weights move toward the
# new speech and no further
REPLAY_SHARE = 0.5  # of each epoch's audio, from the original mixture (where it is found)
# The original mixture's real speech, relative to a data root (../shared/data here): (manifest, split).
REPLAY_SOURCES = (("speechocean762/train.jsonl", ""), ("librispeech/train-clean-5.jsonl", ""),
                  ("fsdd/fsdd.jsonl", "train"))


class SplitError(ValueError):
    """Data that cannot be split into a training and a test set worth measuring; one line."""


def input_rows(data: Path, out_dir: Path, report: Report) -> list[dict]:
    """Manifest rows (audio relative to `out_dir`) for DATA: a folder, a .csv/.tsv table or a .jsonl manifest,
    each row checked as `python -m asr.manifest` checks it (unreadable audio, empty text: reported and left
    out). BuildError for input that cannot be used at all; ManifestError for a broken manifest line."""
    if data.is_dir():
        return folder_rows(data, out_dir, report)
    if data.suffix.lower() in DELIMITERS:
        return table_rows(data, out_dir, report)
    if data.suffix.lower() == ".jsonl":
        return [row for u in read_manifest(data)
                if (row := manifest_row(u.audio, u.text, u.speaker, out_dir, report)) is not None]
    if not data.exists():
        raise BuildError(f"{data}: no such folder or file")
    raise BuildError(f"{data}: not a folder of recordings, a .csv/.tsv table or a .jsonl manifest")


@dataclass
class Split:
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
    if len(split.test) < MIN_TEST_UTTERANCES:
        raise SplitError(f"only {len(split.test)} test utterances held out ({split.by}): at least "
                         f"{MIN_TEST_UTTERANCES} are needed to measure what fine-tuning gains; record more, "
                         "raise --test-share, or give a --test MANIFEST")
    if not split.train:
        raise SplitError("no utterance is left to fine-tune on once the test split is held out")


def replay_rows(root: Path, seconds: float, out_dir: Path, avoid: set[Path], seed: int = 0,
                max_duration: float = 20.0) -> list[dict]:
    """About `seconds` of utterances drawn at random from the replay manifests found under `root` (none found:
    []), as rows relative to `out_dir`; never a recording in `avoid` (the user's own, resolved paths)."""
    pool = []
    for manifest, split in REPLAY_SOURCES:
        if (root / manifest).is_file():
            pool += [u for u in read_manifest(root / manifest, split, durations=True)
                     if u.duration <= max_duration and u.audio.resolve() not in avoid]
    if not pool or seconds <= 0:
        return []
    random.Random(seed).shuffle(pool)
    rows, total = [], 0.0
    while total < seconds:  # a pool smaller than the share asked for is repeated
        for utt in pool:
            if total >= seconds:
                break
            rows.append({"audio": relative_audio(utt.audio, out_dir), "duration": utt.duration, "text": utt.text,
                         "speaker": utt.speaker})
            total += utt.duration
    return rows
