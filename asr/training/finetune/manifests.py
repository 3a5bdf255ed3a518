"""The manifests of a fine-tune's DIR/data/: the recordings given, as rows (`input_rows`), kept as
all/train/test.jsonl (`keep_data`, read back by `rows_of`), and the replayed share of the original training
mixture (`replay_rows`, DIR/data/replay.jsonl). No torch.

- `input_rows`: manifest rows for DATA (a folder of audio with transcripts beside it, a CSV/TSV table, or a
  manifest), built and checked by the rules of `python -m asr.manifest` (asr/corpus/build.py), which reports what
  it leaves out one line each.
- `replay_rows`: a share of the original training mixture (speechocean762, LibriSpeech, FSDD manifests under
  a data root, where they are), mixed into every epoch so the model keeps general speech.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

from asr.corpus.build import DELIMITERS, BuildError, Report, folder_rows, manifest_row, table_rows
from asr.corpus.manifest import read_manifest, relative_audio, write_manifest
from asr.training.finetune.split import Split, SplitError

# The original mixture's real speech, relative to a data root (../shared/data here): (manifest, split).
REPLAY_SOURCES = (("speechocean762/train.jsonl", ""), ("librispeech/train-clean-5.jsonl", ""),
                  ("fsdd/fsdd.jsonl", "train"))


def input_rows(data: Path, out_dir: Path, report: Report, skip_bad: bool = False) -> list[dict]:
    """Manifest rows (audio relative to `out_dir`) for DATA: a folder, a .csv/.tsv table or a .jsonl manifest,
    each row checked as `python -m asr.manifest` checks it (unreadable audio, empty text: reported and left
    out). BuildError for input that cannot be used at all; ManifestError for a manifest line without usable text
    or otherwise broken (`read_manifest`'s rules, as asr.evaluate and training read them), unless `skip_bad`
    (--skip-bad): then it is reported and left out."""
    if data.is_dir():
        return folder_rows(data, out_dir, report)
    if data.suffix.lower() in DELIMITERS:
        return table_rows(data, out_dir, report)
    if data.suffix.lower() == ".jsonl":
        skipped = [] if skip_bad else None
        utterances = read_manifest(data, skipped=skipped)
        for err in skipped or []:
            report.skip("bad manifest line", str(err))
        return [row for u in utterances
                if (row := manifest_row(u.audio, u.text, u.speaker, out_dir, report)) is not None]
    if not data.exists():
        raise BuildError(f"{data}: no such folder or file")
    raise BuildError(f"{data}: not a folder of recordings, a .csv/.tsv table or a .jsonl manifest")


def rows_of(path: Path) -> list[dict]:
    """The rows of the manifest at `path` as written (no checks); [] when there is none."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def keep_data(out: Path, split: Split, rows: list[dict]) -> None:
    """DIR/data/{all,train,test}.jsonl; refused when DIR already holds a run on other data."""
    data = out / "data"
    wanted = {"all.jsonl": rows, "train.jsonl": split.train, "test.jsonl": split.test}
    if (out / "run").exists() and any(rows_of(data / name) != value for name, value in wanted.items()):
        raise SplitError(f"{out} holds a fine-tune of other data (its data/ differs from what this data gives now); "
                         f"give another --out, or remove {out} to start again")
    data.mkdir(parents=True, exist_ok=True)
    for name, value in wanted.items():
        write_manifest(data / name, value)


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
