"""`asr.transcribe --ray` on a local two-node Ray cluster: the same rows as `asr.transcribe --format json`,
a resumed job redoes only its missing shard, and a changed job is refused before Ray starts."""
from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from asr import transcribe
from asr.decoding.beam import BeamConfig
from conftest import tone, write
from helpers import ROOT

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")  # Ray's own settings
EXAMPLES = sorted((ROOT / "asr" / "examples").glob("*.flac"))
NODE = {"num_cpus": 1, "object_store_memory": 80 * 2**20}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A head and one worker node of 1 CPU each (two recognizer actors); after the module, shut down with
    none of its nodes' processes (raylets, the head's services) left running."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_USAGE_STATS_ENABLED", "0")
        began = time.perf_counter()
        nodes = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
        nodes.add_node(**NODE)
        nodes.wait_for_nodes()
        print(f"two-node Ray cluster up in {time.perf_counter() - began:.1f} s")
        try:
            yield nodes
        finally:
            processes = [proc for node in nodes.list_all_nodes() for _, proc in node.live_processes()]
            nodes.shutdown()
            assert processes and all(proc.poll() is not None for proc in processes)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Five files (three shards of two): the examples, a tone, a file that is not audio, an example's copy."""
    folder = tmp_path_factory.mktemp("inputs")
    broken = folder / "broken.wav"
    broken.write_text("not audio\n")
    copy = shutil.copy(EXAMPLES[0], folder / "copy.flac")
    return [str(EXAMPLES[0]), str(EXAMPLES[1]), str(write(folder / "tone.wav", tone(1.5))), str(broken), str(copy)]


def ray_job(cluster: Cluster, inputs: list[str], out: Path, *options: str) -> int:
    """`asr.transcribe --ray ADDRESS INPUTS --output-dir OUT --shard-rows 2 OPTIONS` in this process."""
    return transcribe.main(["--ray", cluster.address, *inputs, "--output-dir", str(out), "--shard-rows", "2",
                            *options])


@pytest.fixture(scope="module")
def finished(cluster: Cluster, inputs: list[str], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The folder of a finished job over `inputs`, and what it said on stderr."""
    out = tmp_path_factory.mktemp("ray") / "job"
    with pytest.MonkeyPatch.context() as patch:
        stderr = io.StringIO()
        patch.setattr(sys, "stderr", stderr)
        began = time.perf_counter()
        status = ray_job(cluster, inputs, out)
    print(f"job of 3 shards on 2 actors: {time.perf_counter() - began:.1f} s")
    assert status == 1, stderr.getvalue()  # the broken file fails in its row; the others are transcribed
    return out, stderr.getvalue()


def shard_rows(out: Path) -> list[dict]:
    """Every row of the shards in order, without the compute time (rtf)."""
    rows = [json.loads(line) for path in sorted(out.glob("shard-*.jsonl")) for line in path.read_text().splitlines()]
    return [{k: v for k, v in row.items() if k != "rtf"} for row in rows]


def test_rows_equal_plain_transcribe_json(finished: tuple[Path, str], inputs: list[str]) -> None:
    out, stderr = finished
    assert "3 shard(s) written, 0 already done, 3 in all (5 files, 1 failed)" in stderr
    assert sorted(p.name for p in out.iterdir()) == ["job.json", "shard-00000.jsonl", "shard-00001.jsonl",
                                                      "shard-00002.jsonl"]
    plain = subprocess.run([sys.executable, "-m", "asr.transcribe", *inputs, "--format", "json"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert plain.returncode == 1 and "broken.wav" in plain.stderr
    expected = [{k: v for k, v in json.loads(line).items() if k != "rtf"} for line in plain.stdout.splitlines()]
    rows = shard_rows(out)
    assert [r["row"] for r in rows] == list(range(5)) and [r["audio"] for r in rows] == inputs
    assert "broken.wav" in rows[3]["error"] and set(rows[3]) == {"row", "audio", "error"}
    assert [{k: v for k, v in r.items() if k != "row"} for r in rows if "error" not in r] == expected
    assert rows[0]["text"] and rows[0]["text"] != rows[0]["plain"]  # restored text, as plain transcribe gives


def test_a_stopped_job_resumes_without_redoing_finished_shards(finished: tuple[Path, str], inputs: list[str],
                                                               cluster: Cluster, tmp_path: Path, capsys) -> None:
    """As a killed job leaves it: shard 1 never finished (only its temp file is there); the rerun writes it
    alone, with a speed-only option changed, and leaves the finished shards' files as they were."""
    out = Path(shutil.copytree(finished[0], tmp_path / "job"))
    rows = shard_rows(out)
    kept = {name: (out / name).stat() for name in ("shard-00000.jsonl", "shard-00002.jsonl")}
    (out / "shard-00001.jsonl").unlink()
    (out / "shard-00001.jsonl.tmp").write_text('{"row": 2, "half')
    began = time.perf_counter()
    assert ray_job(cluster, inputs, out, "--workers", "2") == 1
    print(f"resumed shard: {time.perf_counter() - began:.1f} s")
    err = capsys.readouterr().err
    assert "1 shard(s) to transcribe on 1 recognizer actor(s)" in err
    assert "1 shard(s) written, 2 already done, 3 in all (5 files, 1 failed)" in err
    for name, stat in kept.items():
        now = (out / name).stat()
        assert (now.st_ino, now.st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns), name
    assert shard_rows(out) == rows and not (out / "shard-00001.jsonl.tmp").exists()
    assert ray_job(cluster, inputs, out) == 1  # all done: nothing to run, the failed row still counts
    assert "0 shard(s) written, 3 already done" in capsys.readouterr().err


@pytest.mark.parametrize("changed,differs", [(["--greedy"], "options.greedy"),
                                             (["--lm-weight", f"{BeamConfig().lm_weight + 1:g}"], "options.lm_weight"),
                                             (["--shard-rows", "3"], "shard_rows")])
def test_a_changed_job_is_refused(finished: tuple[Path, str], inputs: list[str], cluster: Cluster, changed: list[str],
                                  differs: str, capsys) -> None:
    out = finished[0]
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert ray_job(cluster, inputs, out, *changed) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"({differs} differ)" in err and str(out) in err, err
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before


def test_other_inputs_are_refused(finished: tuple[Path, str], inputs: list[str], cluster: Cluster, capsys) -> None:
    assert ray_job(cluster, inputs[:4], finished[0]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "(inputs_sha256, rows differ)" in err, err
