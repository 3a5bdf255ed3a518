"""Transcription across a Ray cluster: `python -m asr.transcribe --ray [ADDRESS] INPUTS --output-dir DIR`.

The inputs (audio files, folders, JSON Lines manifests, as `asr.transcribe` takes them) are cut into fixed
shards of --shard-rows files (asr/batch/shards.py). The shards not yet written go through Ray Data's batch
inference: `map_batches` over a pool of recognizer actors, each loading the model once (--cores-per-worker
CPUs and recognizer threads each, or one GPU with --device cuda), one shard per call. This process writes
each shard's result file as it comes back, so a job that is stopped and started again skips the finished
shards. ADDRESS: none (a Ray cluster already started on this machine, else a new local one), `auto`, or the
head's HOST:PORT (`ray://HOST:10001` for Ray Client, with `pip install 'ray[client]'`). Every worker machine
needs asr installed and must see the audio at the same absolute paths (a shared filesystem); only this machine
writes the results.

Ray is optional (`pip install 'asr[ray]'`); nothing here imports it until a job starts.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import socket
import sys
from typing import Sequence

import numpy as np

from asr import cli
from asr.api import Transcriber
from asr.audio import AudioError
from asr.batch.files import transcribed
from asr.batch.shards import Job, JobError, text_options
from asr.decoding.beam import LMError
from asr.model.errors import ModelError
from asr.text.formats import Transcript

RAY_MISSING = "--ray needs Ray, which is not installed: pip install 'asr[ray]'"
ADDRESS = re.compile(r"local|auto|ray://\S+|[\w.\-]+:\d+")  # what may follow --ray (else it is an input)
DEFAULT_SHARD_ROWS = 100
ERROR_LINE = re.compile(r"[A-Za-z_][\w.]*(Error|Exception): ")  # "RuntimeError: ..." in a remote traceback


def add_args(parser: argparse.ArgumentParser) -> None:
    """--ray [ADDRESS], --shard-rows, --workers, --cores-per-worker."""
    group = parser.add_argument_group("many machines (Ray Data; needs pip install 'asr[ray]')")
    group.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                       help="transcribe on a Ray cluster into --output-dir, one JSON Lines file per shard, resuming "
                            "a stopped job: ADDRESS is auto, HOST:PORT of the head or ray://HOST:PORT; "
                            "none: the cluster started on this machine, else a new local one")
    group.add_argument("--shard-rows", type=cli.positive_int, default=DEFAULT_SHARD_ROWS, metavar="N",
                       help=f"input files per shard: the unit of work and of resuming (default {DEFAULT_SHARD_ROWS})")
    group.add_argument("--workers", type=cli.positive_int, metavar="N",
                       help="recognizer actors (default: one per GPU with --device cuda, else one per "
                            "--cores-per-worker CPUs of the cluster)")
    group.add_argument("--cores-per-worker", type=cli.positive_int, default=1, metavar="N",
                       help="CPUs each actor reserves and its recognizer's threads (default 1)")


def address_flag(argv: Sequence[str]) -> list[str]:
    """argv with a bare `--ray` (one followed by an input, not an ADDRESS) made `--ray=local`, so that
    `--ray talk.wav` reads talk.wav as an input."""
    out = list(argv)
    for i, token in enumerate(out):
        if token == "--":
            break
        if token == "--ray" and (i + 1 == len(out) or not ADDRESS.fullmatch(out[i + 1])):
            out[i] = "--ray=local"
    return out


def transcribe_files(transcriber: Transcriber, paths: list[str],
                     args: argparse.Namespace) -> list[Transcript | Exception]:
    """Each file's Transcript, or the AudioError that stopped it, as plain `asr.transcribe` decodes them
    (`asr.batch.files.transcribed`: side by side in padded batches unless --batch-seconds 0): the one place a job
    calls the recognizer."""
    return [result for _, result in transcribed(transcriber, paths, args, lambda seconds: None)]


def result_line(row: int, audio: str, result: Transcript | Exception) -> str:
    """One result row: `transcribe --format json`'s object (audio named as in the inputs) after "row", or
    {"row", "audio", "error"} for a file that failed."""
    if isinstance(result, Exception):
        message = str(result) if isinstance(result, AudioError) else f"{type(result).__name__}: {result}"
        return json.dumps({"row": row, "audio": audio, "error": message})
    fields = json.loads(result.render("json"))
    fields["audio"] = audio
    return json.dumps({"row": row, **fields})


class ShardTranscriber:
    """A Ray actor's recognizer, loaded once: a batch of shards -> each shard's result lines, joined."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.transcriber = cli.load_transcriber(args)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        texts = []
        for first, audio in zip(batch["first_row"], batch["audio"]):
            given, paths = zip(*json.loads(audio))
            results = transcribe_files(self.transcriber, list(paths), self.args)
            texts.append("\n".join(result_line(int(first) + i, name, result)
                                   for i, (name, result) in enumerate(zip(given, results))))
        return {"shard": batch["shard"], "lines": np.array(texts, dtype=object)}


def _check(args: argparse.Namespace, files: list) -> str | None:
    """Why these options cannot run as a Ray job (one line), or None."""
    if not args.output_dir:
        return "--ray writes its shards into a folder: add --output-dir DIR"
    if args.format not in ("txt", "json"):
        return f"--ray writes JSON Lines shards; --format {args.format} does not apply"
    if any(str(f) == "-" for f in files):
        return "--ray cannot share out standard input (-): name files, folders or manifests"
    try:
        import ray  # noqa: F401, PLC0415 (optional)
    except ImportError:
        return RAY_MISSING
    return None


def _connect(address: str) -> None:
    """Attach to the cluster at `address` (local: the one started on this machine, else a new one)."""
    import ray  # noqa: PLC0415 (optional)

    host, _, port = address.rpartition(":")
    if host and "://" not in address:  # HOST:PORT: fail at once where nothing listens (Ray retries for minutes)
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
        except OSError as err:
            raise ValueError(f"cannot join the Ray cluster at {address}: {err.strerror or err} (is `ray start "
                             "--head` running there?)") from None
    try:
        ray.init(address=None if address == "local" else address, logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError) as err:  # no cluster there, or its token is missing
        cause = str(err.__cause__ or "").strip().splitlines()
        raise ValueError(f"cannot join the Ray cluster at {address}: {cause[-1] if cause else err}") from None


def _pool_size(args: argparse.Namespace, gpu: bool, shards: int) -> int:
    """Recognizer actors: --workers, else one per GPU (gpu) or per --cores-per-worker CPUs; at most `shards`."""
    import ray  # noqa: PLC0415 (optional)

    resources = ray.cluster_resources()
    if args.workers:
        size = args.workers
    elif gpu:
        size = int(resources.get("GPU", 0))
        if size == 0:
            raise ValueError("--device cuda: the Ray cluster has no GPUs")
    else:
        size = max(1, int(resources.get("CPU", 1) // args.cores_per_worker))
    return min(size, shards)


def run(args: argparse.Namespace, files: list) -> int:
    """Run (or resume) the job the options describe; the exit status (1 if a file or the job failed)."""
    problem = _check(args, files)
    if problem:
        cli.error("transcribe", problem)
        return 1
    job = Job(args.output_dir, tuple(str(f) for f in files), args.shard_rows, text_options(args))
    args.threads = args.cores_per_worker
    gpu = str(getattr(args, "device", None) or "cpu").startswith("cuda")
    try:
        cli.make_output_dir(args.output_dir)
        job.open()
        _load_check(args, gpu)
    except (JobError, ModelError, LMError, ValueError, OSError) as err:
        cli.error("transcribe", err)
        return 1
    done = set(job.finished())
    todo = [s for s in range(job.shard_count) if s not in done]
    written = 0
    if todo:
        items = [{"shard": s, "first_row": job.rows(s).start,
                  "audio": json.dumps([(job.audio[r], os.path.abspath(job.audio[r])) for r in job.rows(s)])}
                 for s in todo]
        try:
            written = _run_pool(args, job, items, gpu)
        except ValueError as err:
            cli.error("transcribe", err)
            return 1
    failed = job.failed_rows()
    print(f"asr.transcribe: {written} shard(s) written, {len(done)} already done, {job.shard_count} in all "
          f"({len(job.audio)} files, {failed} failed) in {job.folder}", file=sys.stderr)
    return 1 if failed or written + len(done) < job.shard_count else 0


def _load_check(args: argparse.Namespace, gpu: bool) -> None:
    """Load the model and decoder here once, so that bad options fail in one line before the cluster starts
    (errors as `cli.load_transcriber`'s). For a GPU job on a machine without one, the GPU is left to the workers."""
    if gpu:
        from asr.model.device import for_onnx, gpu_visible  # noqa: PLC0415 (imports torch where installed)

        if not gpu_visible():
            if args.backend == "onnx" or args.onnx_dir or args.int8:
                for_onnx(args.device)
            args = argparse.Namespace(**{**vars(args), "device": "cpu"})
    cli.load_transcriber(args)


def _run_pool(args: argparse.Namespace, job: Job, items: list[dict], gpu: bool) -> int:
    """Transcribe the shards in `items` on the cluster, writing each as it comes back; how many were written."""
    import ray  # noqa: PLC0415 (optional)

    _connect(args.ray)
    written = 0
    try:
        size = _pool_size(args, gpu, len(items))
        dataset = ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
            ShardTranscriber, fn_constructor_args=(args,), batch_size=1, batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=size), num_cpus=args.cores_per_worker, num_gpus=1 if gpu else 0)
        print(f"asr.transcribe: {len(items)} shard(s) to transcribe on {size} recognizer actor(s)", file=sys.stderr)
        for result in dataset.iter_rows():
            shard = int(result["shard"])
            job.write_shard(shard, str(result["lines"]).split("\n"))
            written += 1
            print(f"asr.transcribe: {job.shard_path(shard).name} written ({written}/{len(items)})", file=sys.stderr)
        return written
    except ray.exceptions.RayError as err:  # an actor that cannot load, a lost node past Ray's retries...
        raise ValueError(f"the job stopped after {written} shard(s) ({_first_cause(err)}): run the command again "
                         "to resume") from None
    finally:
        ray.shutdown()


def _first_cause(err: BaseException) -> str:
    """The exception at the root of a Ray error as "Type: message" (the first one its remote traceback names
    that is not Ray's own), else the error's first line."""
    for line in str(err).splitlines():
        if ERROR_LINE.match(line) and not line.startswith("ray."):
            return line.strip()
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return f"{type(err).__name__}: {lines[0] if lines else 'no reason given'}"
