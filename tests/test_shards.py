"""The sharded job's folder (asr/batch/shards.py) and `asr.transcribe --ray`'s checks, without Ray: fixed shards,
job records that refuse another job, atomic shard files, and one error line for what cannot run."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from asr import transcribe
from asr.batch import cluster
from asr.batch.shards import JOB_FILE, Job, JobError, text_options
from helpers import ROOT

EXAMPLE = str(ROOT / "asr" / "examples" / "synthetic_slt.flac")


def job(folder: Path, count: int = 5, shard_rows: int = 2, **options: object) -> Job:
    return Job(folder, tuple(f"audio/{i}.wav" for i in range(count)), shard_rows, {"greedy": False, **options})


def test_shards_are_fixed_slices_of_the_inputs(tmp_path: Path) -> None:
    shards = job(tmp_path / "out")
    assert shards.shard_count == 3
    assert [list(shards.rows(s)) for s in range(3)] == [[0, 1], [2, 3], [4]]
    assert shards.shard_path(2).name == "shard-00002.jsonl"
    assert job(tmp_path, count=4).shard_count == 2 and job(tmp_path, count=1, shard_rows=100).shard_count == 1


def test_a_job_folder_takes_only_its_own_job(tmp_path: Path) -> None:
    out = tmp_path / "out"
    job(out).open()
    record = json.loads((out / JOB_FILE).read_text())
    assert record["rows"] == 5 and record["shard_rows"] == 2 and record["options"] == {"greedy": False}
    job(out).open()  # the same job again: resumes
    for other, differs in ((job(out, greedy=True), "options.greedy"), (job(out, count=6), "inputs_sha256, rows"),
                           (job(out, shard_rows=3), "shard_rows"), (job(out, lm="x.arpa"), "options.lm")):
        with pytest.raises(JobError, match=f"holds another job \\({differs} differ\\)"):
            other.open()
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "shard-00000.jsonl").write_text("{}\n")
    with pytest.raises(JobError, match="shard files but no job.json"):
        job(stray).open()
    (tmp_path / "file").write_text("")
    with pytest.raises(JobError, match="not a directory"):
        job(tmp_path / "file").open()


def test_shards_are_written_whole_and_found(tmp_path: Path) -> None:
    shards = job(tmp_path)
    shards.open()
    (tmp_path / "shard-00000.jsonl.tmp").write_text('{"row": 0, "te')  # what a killed job may leave
    assert shards.finished() == []
    shards.write_shard(0, ['{"row": 0, "text": "a"}', '{"row": 1, "audio": "audio/1.wav", "error": "bad"}'])
    shards.write_shard(2, ['{"row": 4, "text": "c"}\n'])
    assert shards.finished() == [0, 2] and shards.failed_rows() == 1
    assert (tmp_path / "shard-00002.jsonl").read_text() == '{"row": 4, "text": "c"}\n'
    assert not list(tmp_path.glob("*.tmp"))
    with pytest.raises(ValueError, match="shard 1 has 2 rows, got 1"):
        shards.write_shard(1, ['{"row": 2}'])


def test_only_text_changing_options_make_the_job() -> None:
    args = transcribe._parser().parse_args(["x.wav", "--output-dir", "o", "--threads", "4", "--chunk-ms", "500",
                                            "--lm-weight", "1.5", "--hotwords", "names.txt"])
    options = text_options(args)
    assert options["lm_weight"] == 1.5 and options["hotwords"] == "names.txt" and options["plain"] is False
    assert not {"threads", "chunk_ms", "output_dir", "inputs", "ray", "shard_rows", "workers"} & set(options)
    json.dumps(options)  # JSON-ready: job.json records it


@pytest.mark.parametrize("argv,expected", [
    (["--ray", "a.jsonl", "--output-dir", "o"], ["--ray=local", "a.jsonl", "--output-dir", "o"]),
    (["a.wav", "--ray"], ["a.wav", "--ray=local"]),
    (["--ray", "auto", "a.wav"], ["--ray", "auto", "a.wav"]),
    (["--ray", "10.0.0.5:6379", "a.wav"], ["--ray", "10.0.0.5:6379", "a.wav"]),
    (["--ray", "ray://head:10001", "a.wav"], ["--ray", "ray://head:10001", "a.wav"]),
])
def test_ray_address_is_optional(argv: list[str], expected: list[str]) -> None:
    assert cluster.address_flag(argv) == expected
    args = transcribe._parser().parse_args(expected)
    assert args.inputs == [a for a in expected if a.endswith((".wav", ".jsonl"))] and args.ray


@pytest.mark.parametrize("argv,message", [
    ([EXAMPLE], "--ray writes its shards into a folder: add --output-dir DIR"),
    ([EXAMPLE, "--output-dir", "{out}", "--format", "srt"], "--format srt does not apply"),
    (["-", "--output-dir", "{out}"], "cannot share out standard input"),
    ([EXAMPLE, "--output-dir", "{out}"], "pip install 'asr[ray]'"),  # with Ray not installed
])
def test_what_cannot_run_is_one_error_line(argv: list[str], message: str, tmp_path: Path, monkeypatch,
                                           capsys) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails, as without the extra
    out = tmp_path / "out"
    assert transcribe.main(["--ray", *[a.format(out=out) for a in argv]]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("asr.transcribe: error: ") and message in err, err
    assert not out.exists()
