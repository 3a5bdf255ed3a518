"""`asr.batch.padded`: batched whole-file transcription gives the per-file streaming text, file by file; bad files are
skipped and reported; --device's errors are one line and a non-zero exit."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import asr
from asr import evaluate, serve, transcribe
from asr.audio import AudioError
from asr.audio.files import load_audio
from asr.batch import padded
from asr.corpus import evaluation
from asr.corpus.manifest import read_manifest
from asr.model.device import DeviceError, check_spelling
from conftest import write
from helpers import DATA

DEV = DATA / "speechocean762" / "dev.jsonl"
pytestmark = pytest.mark.skipif(not DEV.is_file(), reason="needs ../shared/data/speechocean762")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Dev utterances of very different lengths: 0.3 s, a few of 2-6 s, and one of about 14 s (four utterances
    end to end, so several segments, many 2 s windows) in the middle of the list."""
    folder = tmp_path_factory.mktemp("batch")
    utterances = read_manifest(DEV)[:8]
    waves = [load_audio(u.audio) for u in utterances]
    long = write(folder / "long.wav", np.concatenate([np.concatenate([w, np.zeros(8000, np.float32)]) for w in waves[:4]]))
    short = write(folder / "short.wav", waves[4][:4800])
    return [Path(u.audio) for u in utterances[4:6]] + [long, short] + [Path(u.audio) for u in utterances[6:]]


def same_as_per_file(model: asr.Transcriber, files: list[Path], batch_seconds: float) -> None:
    """The batched transcripts equal the per-file ones, file by file: text, segments and word times."""
    batched = list(padded.transcribe_batched(model, files, batch_seconds))
    assert [source for source, _ in batched] == files  # in input order
    for path, result in batched:
        alone = model.transcribe(path)
        assert result.text == alone.text, path
        assert result.duration == pytest.approx(alone.duration)
        assert [(s.start, s.end, s.text) for s in result.segments] == [(s.start, s.end, s.text) for s in alone.segments]
        assert [(w.word, w.start, w.end) for w in result.words] == [(w.word, w.start, w.end) for w in alone.words]


def test_greedy_batched_text_equals_per_file(files: list[Path]) -> None:
    model = asr.load(greedy=True)
    long = next(padded.transcribe_batched(model, [files[2]]))[1]
    assert long.duration > 3 * padded.WINDOW_SECONDS and len(long.segments) >= 2 and long.text
    same_as_per_file(model, files, batch_seconds=12.0)  # 3 rows: long and short files step side by side


def test_a_file_too_short_for_a_frame_has_no_tail_as_per_file(files: list[Path]) -> None:
    model = asr.load(greedy=True)
    sources = [np.zeros(40, np.float32), load_audio(files[0]), np.full(200, 0.1, np.float32)]
    batched = [result for _, result in padded.transcribe_batched(model, sources, 12.0)]
    assert [(r.text, r.duration) for r in batched] == [(model.transcribe(a, sample_rate=16000).text,
                                                      round(a.size / 16000, 3)) for a in sources]  # to the ms
    assert batched[1].text and not batched[0].text


def test_beam_batched_text_equals_per_file(files: list[Path]) -> None:
    same_as_per_file(asr.load(), files, batch_seconds=8.0)  # the bundled word LM, restored finals


def test_evaluate_batched_equals_one_file_at_a_time() -> None:
    model = asr.load(greedy=True)
    utterances = read_manifest(DEV)[:6]
    alone, _, _ = evaluation.evaluate(model, utterances, evaluation.options(batch_seconds=0))
    batched, latencies, errors = evaluation.evaluate(model, utterances, evaluation.options(batch_seconds=8))
    assert [r.hyp for r in batched] == [r.hyp for r in alone] and not errors and not latencies
    assert all(r.hyp for r in alone)
    assert [r.duration for r in batched] == pytest.approx([r.duration for r in alone])


def test_a_bad_file_is_reported_and_the_others_transcribed(files: list[Path], tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF not really a wave file")
    inputs = [files[0], bad, tmp_path / "missing.wav", files[1]]
    results = dict(padded.transcribe_batched(asr.load(greedy=True), inputs, 4.0))
    assert isinstance(results[bad], AudioError) and isinstance(results[tmp_path / "missing.wav"], AudioError)
    assert results[files[0]].text and results[files[1]].text
    code = transcribe.main([str(p) for p in inputs] + ["--greedy", "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 1
    assert [json.loads(line)["text"] for line in out.splitlines()] == [results[files[0]].text, results[files[1]].text]
    assert "bad.wav" in err and "missing.wav: no such file" in err and "2 input(s) failed, 2 transcribed" in err


def test_sub_batches_keep_short_pieces_apart() -> None:
    assert padded.sub_batches([32000, 3200, 32000, 20000, 16000]) == [[0, 2, 3, 4], [1]]
    assert padded.sub_batches([]) == []


@pytest.mark.parametrize("args,message", [
    (["--device", "gpu"], "--device 'gpu': must be cpu, cuda, cuda:N or auto"),
    (["--backend", "onnx", "--device", "cuda"], "--device cuda: the onnx backend runs on the CPU only"),
    (["--int8", "--device", "cuda:0"], "--device cuda:0: the onnx backend runs on the CPU only"),
])
def test_device_errors_are_one_line(args: list[str], message: str, files: list[Path], capsys) -> None:
    assert transcribe.main([str(files[0]), "--greedy", *args]) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_cuda_without_a_gpu_is_one_line(files: list[Path], capsys) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    assert evaluate.main(["--manifest", str(DEV), "--limit", "1", "--greedy", "--device", "cuda"]) == 1
    assert "--device cuda: no CUDA GPU is available here" in capsys.readouterr().err
    assert serve.main(["--device", "cuda:1", "--port", "0"]) == 1  # before it listens
    assert "asr.serve: error: --device cuda:1: no CUDA GPU is available here" in capsys.readouterr().err


def test_torch_backend_on_cpu_and_auto(files: list[Path]) -> None:
    pytest.importorskip("torch")
    on_cpu = asr.load(greedy=True, backend="torch", device="cpu")
    assert str(on_cpu.recognizer.model.device) == "cpu"
    automatic = asr.load(greedy=True, device="auto")  # a GPU where torch sees one, else the CPU (onnx)
    expected = on_cpu.transcribe(files[0]).text
    assert [r.text for _, r in padded.transcribe_batched(on_cpu, files[:2])][0] == expected
    assert automatic.transcribe(files[0]).text == expected


def test_device_spelling() -> None:
    assert [check_spelling(d) for d in ("cpu", "cuda", "cuda:1", "auto", None)] == ["cpu", "cuda", "cuda:1", "auto", None]
    with pytest.raises(DeviceError, match="must be cpu"):
        check_spelling("cuda:x")


def test_benchmarks_refuse_committed_figures_on_a_busy_machine(tmp_path: Path, monkeypatch, capsys) -> None:
    from helpers import ROOT
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    from bench import quiet

    monkeypatch.setattr(quiet.os, "getloadavg", lambda: (0.93, 0.5, 0.4))
    with pytest.raises(SystemExit) as refused:
        quiet.guard(False, ROOT / "benchmarks", "batched")
    assert refused.value.code == 2
    assert capsys.readouterr().err.startswith("batched: error: the 1-minute load is 0.93 (> 0.5)")
    assert quiet.guard(True, ROOT / "benchmarks") == 0.93  # told to: the figures record the load
    assert quiet.guard(False, tmp_path) == 0.93  # not the committed folder (a smoke run's): never refused


def test_benchmarks_name_the_machine_and_its_speed(monkeypatch) -> None:
    """Every report says what it ran on: the core count, the processor and a measured speed."""
    import os
    import re

    from helpers import ROOT
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    from bench import quiet

    assert quiet.matmul_gflops(size=64, seconds=0.05) > 0.1
    described = quiet.machine()
    assert re.fullmatch(rf"{os.cpu_count()} cores of .+, \d+ GFLOP/s a core", described), described


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "spawned"])
def test_jobs_split_the_files_over_processes_with_the_same_output(files: list[Path], tmp_path: Path, capsys,
                                                                   monkeypatch, fork: bool) -> None:
    from asr.batch import processes
    monkeypatch.setattr(processes, "GROUP_FILES", 3)  # several groups for two workers, finishing out of order
    monkeypatch.setattr(processes, "forks_safely", lambda args: fork)  # sharing the loaded model, or loading their own
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF not really a wave file")
    inputs = [str(p) for p in files[:5]] + [str(bad)] + [str(p) for p in files[5:]]
    assert transcribe.main(inputs + ["--greedy", "--format", "json"]) == 1
    one = capsys.readouterr()
    assert transcribe.main(inputs + ["--greedy", "--format", "json", "--jobs", "2"]) == 1
    two = capsys.readouterr()
    def rows(out: str) -> list[dict]:
        return [{k: v for k, v in json.loads(line).items() if k != "rtf"} for line in out.splitlines()]
    assert rows(two.out) == rows(one.out) and len(rows(two.out)) == len(files)  # in input order, the bad file left out
    assert "bad.wav" in two.err and f"1 input(s) failed, {len(files)} transcribed" in two.err
    assert transcribe.main(["-", "--jobs", "2"]) == 1 and "standard input" in capsys.readouterr().err
    missing = ["--model", str(tmp_path / "missing.onnx")]  # a model that does not load: the same one line
    assert transcribe.main([str(files[0]), *missing]) == 1
    in_one = capsys.readouterr().err
    assert transcribe.main([str(files[0]), "--jobs", "2", *missing]) == 1
    in_two = capsys.readouterr()
    assert in_two.out == "" and in_two.err == in_one and in_one.startswith("asr.transcribe: error: ")
    assert len(in_one.splitlines()) == 1, in_one


def test_manifest_durations_are_read_once_and_sort_the_batches(files: list[Path], tmp_path: Path, monkeypatch) -> None:
    manifest = tmp_path / "some.jsonl"
    manifest.write_text("".join(json.dumps({"audio": str(p), "duration": 1.0 + i, "text": ""}) + "\n"
                                for i, p in enumerate(files[:2])) + json.dumps({"audio": str(files[2]), "text": ""}) + "\n")
    read: list[str] = []
    monkeypatch.setattr(transcribe, "audio_duration", lambda path: read.append(str(path)) or 7.0)
    found, seconds, errors = transcribe.expand_inputs([str(manifest)])
    assert (found, seconds, errors) == (files[:3], [1.0, 2.0, 7.0], []) and read == [str(files[2])]
    monkeypatch.setattr(padded, "audio_duration", lambda path: pytest.fail(f"{path}'s header read again"))
    recognizer = asr.load(greedy=True).recognizer
    stepped = list(padded.run_batched(recognizer, found, lambda _: padded.LogprobSink(len(recognizer.tokenizer.units())),
                                     seconds=seconds, decode_thread=False))
    assert sorted(index for index, _ in stepped) == [0, 1, 2]


def test_peak_rss_is_the_runs_own_and_its_workers_not_the_starting_process(tmp_path: Path, monkeypatch) -> None:
    """bench/peak.py: a small run started by a large process reports its own peak, and a worker's peak and CPU
    time count."""
    import os
    import subprocess

    from helpers import ROOT
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    from bench import peak

    (tmp_path / "grows.py").write_text(
        "import multiprocessing, sys, time\n"
        "def grow(mb):\n"
        "    block = bytearray(mb << 20)\n"
        "    block[::4096] = b'x' * len(block[::4096])\n"
        "    while time.process_time() < 0.5:\n"
        "        pass\n"
        "if __name__ == '__main__':\n"
        "    worker = multiprocessing.get_context('fork').Process(target=grow, args=(int(sys.argv[1]),))\n"
        "    worker.start(); worker.join()\n")
    ballast = bytearray(400 << 20)  # this process is large: its children's ru_maxrss start from it
    ballast[::4096] = b"x" * len(ballast[::4096])
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    for worker_mb in (0, 200):
        report = tmp_path / f"peak{worker_mb}"
        run = subprocess.Popen(peak.command(report, "grows", str(worker_mb)), env=env)
        _, status, usage = os.wait4(run.pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert usage.ru_maxrss / 1024 > 400  # what os.wait4 would have reported
        measured = peak.read_mb(report)
        assert worker_mb < measured < worker_mb + 150, (worker_mb, measured)
        assert 0.5 < peak.read_cpu_s(report) < 5  # the worker's half second of CPU counts


def test_cpu_split_accounts_for_every_path_and_restores_what_it_timed(monkeypatch, capsys) -> None:
    """bench/split.py: per-file and batched rows whose parts are CPU time spent (none negative, none above the
    total, the same texts), a FLOP rate from torch's counter, and the timed functions put back after."""
    import re

    import asr.model.recognizer
    from asr.decoding.decoder import Decoder
    from helpers import ROOT
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    from bench import split

    originals = (asr.model.recognizer.stream_fbank, Decoder.finish)
    assert split.main(["--manifest", str(DEV), "--limit", "6", "--greedy", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    rows = {name: [float(x) for x in rest.split()] for name, rest in re.findall(r"^(per-file|batched) +(.+)$", out, re.M)}
    assert set(rows) == {"per-file", "batched"}, out
    for encoder, features, search, finals, rest, total, rate in rows.values():
        assert min(encoder, features, search, finals) >= 0 and rest > -0.01 and rate > 0, out
        assert total >= max(encoder, features, search, finals, rest) and total > 0, out
    assert "texts differing: 0 of 6" in out and re.search(r"encoder: \d+ GFLOP", out), out
    assert (asr.model.recognizer.stream_fbank, Decoder.finish) == originals
