"""The output folder of a sharded transcription job (`asr.transcribe --ray`): what is done, what is left.

    DIR/job.json            what the job is: a hash of its input list, the row count, --shard-rows, and the
                            options that change the text (the decoder's, the model's, the endpointing's)
    DIR/shard-00000.jsonl   rows 0 .. N-1 of the input list, in order: one `transcribe --format json` object
                            each with "row" (its index in the list) added; a file that could not be
                            transcribed has {"row", "audio", "error"} instead

Shards are fixed slices of the input list, so the same inputs always make the same shards. Each shard file
appears whole or not at all (written to a temp file, then renamed), so a rerun of the same job skips the
shards it finds and does only the rest, and a rerun with other inputs or options into the same folder is
refused. This module needs no Ray: asr/batch/cluster.py runs the job.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

JOB_FILE = "job.json"
JOB_VERSION = 1
# Options that change only speed or placement, never the text: a rerun may change them freely.
NOT_TEXT = frozenset({"inputs", "output_dir", "format", "ray", "shard_rows", "workers", "cores_per_worker",
                      "threads", "chunk_ms", "device", "batch_seconds"})


class JobError(Exception):
    """An output folder that cannot take this job; the message is one line."""


def text_options(args: argparse.Namespace) -> dict[str, object]:
    """The parsed options that change the text, JSON-ready (paths as strings), by name."""
    def plain(value: object) -> object:
        return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)
    return {name: plain(value) for name, value in sorted(vars(args).items()) if name not in NOT_TEXT}


def inputs_hash(audio: Iterable[str]) -> str:
    """sha256 of the input list, one path a line, in order."""
    digest = hashlib.sha256()
    for path in audio:
        digest.update(path.encode("utf-8", "surrogateescape") + b"\n")
    return digest.hexdigest()


@dataclass(frozen=True)
class Job:
    """A job: its output folder, its input paths in order, rows per shard and its text-changing options."""

    folder: Path
    audio: tuple[str, ...]
    shard_rows: int
    options: dict[str, object]

    @property
    def shard_count(self) -> int:
        return math.ceil(len(self.audio) / self.shard_rows)

    def rows(self, shard: int) -> range:
        """The input rows of shard number `shard`."""
        return range(shard * self.shard_rows, min((shard + 1) * self.shard_rows, len(self.audio)))

    def shard_path(self, shard: int) -> Path:
        return self.folder / f"shard-{shard:05d}.jsonl"

    def record(self) -> dict[str, object]:
        """What job.json holds."""
        return {"version": JOB_VERSION, "inputs_sha256": inputs_hash(self.audio), "rows": len(self.audio),
                "shard_rows": self.shard_rows, "options": self.options}

    def open(self) -> None:
        """Create the folder and job.json, or check that the job.json there is this job's (JobError if not)."""
        job_file = self.folder / JOB_FILE
        if self.folder.exists() and not self.folder.is_dir():
            raise JobError(f"{self.folder}: not a directory")
        if job_file.is_file():
            try:
                found = json.loads(job_file.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
                raise JobError(f"{job_file}: unreadable ({type(err).__name__}); delete the folder to start "
                               "over") from None
            differ = _differences(found if isinstance(found, dict) else {}, self.record())
            if differ:
                raise JobError(f"{self.folder} holds another job ({', '.join(differ)} differ): use another "
                               "--output-dir, or delete this one to start over")
            return
        if any(self.folder.glob("shard-*.jsonl")):
            raise JobError(f"{self.folder} holds shard files but no {JOB_FILE}: use another --output-dir")
        self.folder.mkdir(parents=True, exist_ok=True)
        _write_atomic(job_file, json.dumps(self.record(), indent=1) + "\n")

    def finished(self) -> list[int]:
        """The shards whose files exist (each whole: they are renamed into place)."""
        return [s for s in range(self.shard_count) if self.shard_path(s).is_file()]

    def write_shard(self, shard: int, lines: list[str]) -> None:
        """Write a shard's result lines (one JSON object each, in row order), atomically."""
        if len(lines) != len(self.rows(shard)):
            raise ValueError(f"shard {shard} has {len(self.rows(shard))} rows, got {len(lines)} results")
        _write_atomic(self.shard_path(shard), "".join(line.rstrip("\n") + "\n" for line in lines))

    def failed_rows(self) -> int:
        """Rows with an "error" field in the finished shards."""
        return sum(1 for s in self.finished() for line in self.shard_path(s).read_text(encoding="utf-8").splitlines()
                   if "error" in json.loads(line))


def _differences(found: dict, wanted: dict) -> list[str]:
    """The names (options.NAME for an option) whose values differ between two job records."""
    names = [k for k in wanted if k != "options" and found.get(k) != wanted[k]]
    found_options = found.get("options") if isinstance(found.get("options"), dict) else {}
    options = wanted["options"]
    names += [f"options.{k}" for k in sorted(set(found_options) | set(options))
              if found_options.get(k) != options.get(k)]
    return names


def _write_atomic(path: Path, text: str) -> None:
    """Write `text` to a temp file beside `path`, then rename it into place."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
