"""`asr.evaluate`: scoring, offline == streaming, the report and the last line; its hypotheses are asr.transcribe's text,
normalised (--whole is not)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from asr import evaluate, transcribe
from asr.batch.processes import GROUP_FILES
from asr.corpus import scoring
from asr.corpus.manifest import read_manifest, write_manifest
from asr.text.normalize import normalize
from conftest import tone, write
from helpers import DATA, ROOT

LAST_LINE = re.compile(r"WER=(\d+\.\d\d) CER=(\d+\.\d\d) RTF=(\d+\.\d+) utts=(\d+)")


def test_score_counts_edits() -> None:
    words, chars, alignment = scoring.score("A B C", "A X C D")
    assert (words.ref, words.sub, words.dels, words.ins) == (3, 1, 0, 1)
    assert [a["op"] for a in alignment] == ["equal", "substitute", "equal", "insert"]
    assert alignment[1] == {"op": "substitute", "ref": "B", "hyp": "X"}
    assert chars.ref == 5 and chars.errors == 3
    empty_words, _, _ = scoring.score("", "HELLO THERE")
    assert (empty_words.ref, empty_words.ins) == (0, 2)


@pytest.fixture(scope="module")
def manifest(speech_wav: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("eval")
    rows = [{"audio": str(speech_wav), "duration": 2.0, "text": "The quick brown fox jumps over the lazy dog."},
            {"audio": "tone.flac", "duration": 1.2, "text": "a tone, 2 notes"},
            {"audio": "short.ogg", "duration": 0.7, "text": "hello"}]
    write(folder / "tone.flac", tone(1.2, 22050), 22050)
    write(folder / "short.ogg", tone(0.7, seed=3))
    write_manifest(folder / "m.jsonl", rows)
    return folder / "m.jsonl"


def run(capsys, *args: str) -> tuple[int, list[str]]:
    code = evaluate.main(list(args))
    return code, capsys.readouterr().out.splitlines()


def test_offline_and_streaming_agree(manifest: Path, model_path: Path, tmp_path: Path, capsys) -> None:
    report = tmp_path / "report.json"
    code, offline = run(capsys, "--manifest", str(manifest), "--model", str(model_path), "--report", str(report))
    assert code == 0
    code, streaming = run(capsys, "--manifest", str(manifest), "--model", str(model_path),
                          "--streaming", "--chunk-ms", "500")
    assert code == 0
    a, b = LAST_LINE.fullmatch(offline[-1]), LAST_LINE.fullmatch(streaming[-1])
    assert a and b and a.group(1, 2, 4) == b.group(1, 2, 4) and a.group(4) == "3"
    assert re.fullmatch(r"chunk_ms=500 latency_median_ms=\S+ latency_p95_ms=\S+", streaming[-2])
    assert offline[0] == streaming[0]  # the same substitutions/deletions/insertions

    data = json.loads(report.read_text())
    assert data["mode"] == "offline" and data["summary"]["utts"] == 3
    first = data["utterances"][0]
    assert first["ref"] == "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG"
    assert data["utterances"][1]["ref"] == "A TONE TWO NOTES"
    for utt in data["utterances"]:
        ops = utt["alignment"]
        assert " ".join(o["ref"] for o in ops if o["ref"]).split() == utt["ref"].split()
        assert " ".join(o["hyp"] for o in ops if o["hyp"]).split() == utt["hyp"].split()
    total_errors = sum(u["words"]["sub"] + u["words"]["dels"] + u["words"]["ins"] for u in data["utterances"])
    assert float(a.group(1)) == pytest.approx(100 * total_errors / 14, abs=0.01)


def test_limit_and_missing_audio(manifest: Path, model_path: Path, tmp_path: Path, capsys) -> None:
    code, lines = run(capsys, "--manifest", str(manifest), "--model", str(model_path), "--limit", "1")
    assert code == 0 and lines[-1].endswith(" utts=1")
    broken = tmp_path / "m.jsonl"
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    rows[1]["audio"] = str(tmp_path / "gone.wav")
    rows[2]["audio"] = str(manifest.parent / "short.ogg")
    write_manifest(broken, rows)
    code = evaluate.main(["--manifest", str(broken), "--model", str(model_path)])
    captured = capsys.readouterr()
    assert code == 1 and LAST_LINE.fullmatch(captured.out.splitlines()[-1]).group(4) == "2"
    assert captured.err.strip() == f"asr.evaluate: error: {tmp_path / 'gone.wav'}: no such file"


def test_split_keeps_that_split_and_unsplit_rows(manifest: Path, model_path: Path, tmp_path: Path, capsys) -> None:
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    rows[0]["split"], rows[1]["split"] = "test", "train"  # rows[2] names no split
    for row in rows[1:]:
        row["audio"] = str(manifest.parent / row["audio"])
    split = tmp_path / "split.jsonl"
    write_manifest(split, rows)
    code, lines = run(capsys, "--manifest", str(split), "--model", str(model_path), "--split", "test")
    assert code == 0 and lines[-1].endswith(" utts=2")  # of three rows: the test one and the unsplit one


def test_by_speaker_sums_each_speaker_and_puts_the_worst_first() -> None:
    def result(speaker: str, ref: str, hyp: str) -> scoring.UttResult:
        words, chars, _ = scoring.score(ref, hyp)
        return scoring.UttResult("a.wav", ref, hyp, 1.0, 0.1, words, chars, speaker=speaker)

    rows = scoring.by_speaker([result("ann", "A B", "A B"), result("bob", "A B C D", "A X C D"),
                                result("ann", "C D", "C"), result("bob", "E F", "E F")])
    assert [(speaker, count, words.ref, words.errors) for speaker, count, words, _ in rows] == \
        [("ann", 2, 4, 1), ("bob", 2, 6, 1)]  # 25% before 16.7%
    assert rows[0][3].ref == 6 and rows[0][3].errors == 2  # characters "A B" + "C D"; " D" deleted


def test_by_speaker_lines(manifest: Path, model_path: Path, tmp_path: Path, capsys) -> None:
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    for row, speaker in zip(rows, ["s1", "s2", "s1"]):
        row["speaker"] = speaker
        row["audio"] = str(manifest.parent / row["audio"])
    named = tmp_path / "speakers.jsonl"
    write_manifest(named, rows)
    code, lines = run(capsys, "--manifest", str(named), "--model", str(model_path), "--by-speaker")
    assert code == 0
    per_speaker = [re.fullmatch(r"speaker=(\S+) WER=(\S+) CER=\S+ utts=(\d) words=(\d+)", line) for line in lines[:2]]
    assert all(per_speaker)
    assert sorted((m.group(1), m.group(3), m.group(4)) for m in per_speaker) == [("s1", "2", "10"), ("s2", "1", "4")]
    assert float(per_speaker[0].group(2)) >= float(per_speaker[1].group(2))


def test_jobs_give_the_one_process_scores(tmp_path: Path) -> None:
    """--jobs N (as asr.transcribe's, asr.batch.processes): the same WER, utterance by utterance, as one process. More
    utterances than a worker's group, so that both workers take some."""
    folder = ROOT / "asr" / "examples"
    examples = [(folder / "synthetic_slt.flac", "the weather was cold and the children stayed at home"),
                (folder / "speechocean762_0813_0233.flac", "where are you going to keep it")]
    rows = [{"audio": str(examples[i % 2][0]), "text": examples[i % 2][1], "speaker": str(i % 2)}
            for i in range(GROUP_FILES + 8)]
    write_manifest(tmp_path / "m.jsonl", rows)

    def scored(*args: str) -> tuple[tuple[str, ...], list[tuple[str, str]]]:
        report = tmp_path / f"report{len(args)}.json"
        run_ = subprocess.run([sys.executable, "-m", "asr.evaluate", "--manifest", str(tmp_path / "m.jsonl"),
                               "--greedy", "--report", str(report), *args],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert run_.returncode == 0, run_.stderr
        utterances = json.loads(report.read_text())["utterances"]
        scores = LAST_LINE.search(run_.stdout.splitlines()[-1]).group(1, 2, 4)
        return scores, [(u["audio"], u["hyp"]) for u in utterances]

    alone, jobs = scored(), scored("--jobs", "2")
    assert jobs == alone and len(alone[1]) == len(rows)
    assert len({hyp for _, hyp in alone[1]}) == 2  # each example its own text


def test_jobs_need_the_offline_batches(manifest: Path, capsys) -> None:
    for mode in (["--streaming"], ["--batch-seconds", "0"]):
        with pytest.raises(SystemExit) as exit_:
            evaluate.main(["--manifest", str(manifest), "--jobs", "2", *mode])
        assert exit_.value.code == 2
        assert "--jobs runs the offline mode's batches" in capsys.readouterr().err


def test_the_manifest_may_come_first_without_its_flag(manifest: Path, model_path: Path, capsys) -> None:
    """`asr.evaluate FILE.jsonl` as `asr.transcribe FILE.jsonl` takes it (it was refused: only --manifest)."""
    code, flagged = run(capsys, "--manifest", str(manifest), "--model", str(model_path), "--greedy")
    assert code == 0
    code, given = run(capsys, str(manifest), "--model", str(model_path), "--greedy")
    scores = [LAST_LINE.fullmatch(lines[-1]).group(1, 2, 4) for lines in (given, flagged)]
    assert code == 0 and scores[0] == scores[1]
    with pytest.raises(SystemExit) as exit_:
        evaluate.main([str(manifest), "--manifest", str(manifest.with_name("other.jsonl"))])
    assert exit_.value.code == 2 and "two manifests" in capsys.readouterr().err


SPEECHOCEAN = DATA / "speechocean762" / "dev.jsonl"
LIBRISPEECH = DATA / "librispeech" / "dev-clean-2.jsonl"
LONG = ("8842-304647-0002", "3000-15664-0041")  # 31.7 s and 28.6 s of dev-clean-2: --max-segment (20 s) cuts them


@pytest.fixture(scope="module")
def dev_slice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two longest utterances of LibriSpeech dev-clean-2, then 10 of speechocean762 dev, audio paths absolute."""
    if not (SPEECHOCEAN.is_file() and LIBRISPEECH.is_file()):
        pytest.skip("needs ../shared/data/speechocean762 and ../shared/data/librispeech")
    utterances = [u for u in read_manifest(LIBRISPEECH) if Path(u.audio).stem in LONG] + read_manifest(SPEECHOCEAN)[:10]
    path = tmp_path_factory.mktemp("dev_slice") / "slice.jsonl"
    write_manifest(path, [{"audio": str(u.audio), "duration": u.duration, "text": u.text, "speaker": u.speaker}
                          for u in utterances])
    return path


def hypotheses(capsys, manifest: Path, report: Path, *args: str) -> dict[str, str]:
    """asr.evaluate's normalised hypothesis of each utterance, by audio path (from its --report)."""
    assert evaluate.main([str(manifest), "--report", str(report), *args]) == 0
    capsys.readouterr()
    return {u["audio"]: u["hyp"] for u in json.loads(report.read_text())["utterances"]}


def test_evaluate_scores_the_text_transcribe_prints(dev_slice: Path, tmp_path: Path, capsys) -> None:
    """The bundled model and its defaults (word-LM beam search, restored and written finals): what asr.evaluate
    scores, batched or streamed, is what asr.transcribe prints for the same manifest, normalised, endpoint cuts and
    all; --whole (one segment an utterance) is another text for a long utterance that the endpointer cuts."""
    assert transcribe.main([str(dev_slice), "--format", "json"]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(printed) == 12 and all(row["text"] for row in printed)
    expected = {row["audio"]: normalize(row["text"]) for row in printed}
    long = [row for row in printed if Path(row["audio"]).stem in LONG]
    assert len(long) == 2 and all(len(row["segments"]) >= 2 for row in long)  # cut where the endpointer ends them
    assert hypotheses(capsys, dev_slice, tmp_path / "batched.json") == expected
    streamed = hypotheses(capsys, dev_slice, tmp_path / "streamed.json", "--streaming", "--chunk-ms", "1000", "--limit", "4")
    assert len(streamed) == 4 and streamed == {audio: expected[audio] for audio in streamed}  # both long ones, 2 short
    whole = hypotheses(capsys, dev_slice, tmp_path / "whole.json", "--whole", "--limit", "2")  # the long ones
    assert any(whole[row["audio"]] != expected[row["audio"]] for row in long)
    assert json.loads((tmp_path / "whole.json").read_text())["endpointing"] == "whole"
