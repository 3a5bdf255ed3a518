"""python -m asr.finetune: a folder, a table or a manifest of your own recordings -> a held-out split (refused when
too small to measure), the model scored before and after, a resumable fine-tune (Ctrl-C, then the same command),
the data's words in the word LM's lexicon, and a model folder that asr.load and asr.transcribe take.

A small random model (conftest's model_path) and short tones stand in for speech: every step runs in seconds."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import asr
from asr import transcribe
from asr.decoding import lm_binary
from asr.finetune import main
from asr.training.finetune.recipe import Recipe, anchor_of, guard_of
from asr.training.finetune.split import split_rows
from conftest import tone, write
from helpers import ROOT

WORDS = ["zorblax", "quintaro", "plumbix", "vexel", "kestrell", "tessaly"]  # a vocabulary no shipped LM has


def recording(path: Path, text: str, seconds: float, seed: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write(path, tone(seconds, freq=180.0 + 25 * seed, seed=seed))
    path.with_suffix(".txt").write_text(text + "\n")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two speakers' folders of twelve short recordings each, a transcript beside each."""
    root = tmp_path_factory.mktemp("recordings") / "mine"
    for s, speaker in enumerate(("anna", "bob")):
        for i in range(12):
            recording(root / speaker / f"{i:02d}.wav", f"The {WORDS[i % 6]} {WORDS[(i + s) % 6]}!", 0.5 + 0.02 * i,
                      seed=12 * s + i)
    return root


@pytest.fixture(scope="module")
def replay_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data root with a stand-in for the original mixture's speechocean762 manifest."""
    root = tmp_path_factory.mktemp("replay")
    rows = []
    for i in range(4):
        write(root / "speechocean762" / f"{i}.wav" if (root / "speechocean762").is_dir() else
              (root / "speechocean762").mkdir() or root / "speechocean762" / f"{i}.wav", tone(2.0, seed=100 + i))
        rows.append({"audio": f"{i}.wav", "duration": 2.0, "text": "GENERAL SPEECH", "speaker": "s"})
    (root / "speechocean762" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def audio_and_text(manifest: Path) -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    return sorted((str((manifest.parent / row["audio"]).resolve()), row["text"]) for row in rows)


def test_a_folder_a_table_and_a_manifest_give_the_same_held_out_split(corpus: Path, tmp_path: Path, capsys) -> None:
    assert main([str(corpus), "--out", str(tmp_path / "folder"), "--check"]) == 0
    err = capsys.readouterr().err
    assert "24 utterances" in err and "0 skipped" in err and "1 speaker held out" in err
    by_folder = tmp_path / "folder" / "data"
    table = tmp_path / "lines.csv"
    table.write_text("path,sentence,speaker\n" + "".join(
        f"{p.relative_to(corpus)},\"{p.with_suffix('.txt').read_text().strip()}\",{p.parent.name}\n"
        for p in sorted(corpus.rglob("*.wav"))))
    (corpus / "lines.csv").write_text(table.read_text())  # paths relative to the table's folder
    try:
        assert main([str(corpus / "lines.csv"), "--out", str(tmp_path / "table"), "--check"]) == 0
    finally:
        (corpus / "lines.csv").unlink()
    assert main([str(by_folder / "all.jsonl"), "--out", str(tmp_path / "manifest"), "--check"]) == 0
    for name in ("train.jsonl", "test.jsonl"):
        expected = audio_and_text(by_folder / name)
        assert audio_and_text(tmp_path / "table" / "data" / name) == expected
        assert audio_and_text(tmp_path / "manifest" / "data" / name) == expected
    test_speakers = {json.loads(line)["speaker"] for line in (by_folder / "test.jsonl").read_text().splitlines()}
    assert len(test_speakers) == 1  # a whole speaker held out: the other one is all the training data


def test_the_split_holds_out_speakers_or_recordings_and_is_seeded() -> None:
    rows = [{"audio": f"{s}{i}.wav", "duration": 1.0, "text": "A", "speaker": s} for s in "abcd" for i in range(10)]
    split = split_rows(rows, share=0.4)
    assert split.by == "speaker" and len(split.test) == 20
    assert not {r["speaker"] for r in split.test} & {r["speaker"] for r in split.train}
    assert split_rows(rows, share=0.4).test == split.test  # the same data splits the same way
    recordings = split_rows(rows, by="recording", share=0.25)
    assert recordings.by == "recording" and len(recordings.test) == 10 and len(recordings.train) == 30


def test_a_test_manifest_of_your_choosing_is_the_test_split(corpus: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "given"
    assert main([str(corpus / "anna"), "--out", str(out), "--test", str(corpus / "bob"), "--check"]) == 0
    assert "train 12 utterances" in capsys.readouterr().err
    tested = {Path(audio).parent.name for audio, _ in audio_and_text(out / "data" / "test.jsonl")}
    assert tested == {"bob"} and len(audio_and_text(out / "data" / "test.jsonl")) == 12
    assert main([str(corpus), "--out", str(tmp_path / "overlap"), "--test", str(corpus / "bob"), "--check"]) == 0
    trained = {Path(audio).parent.name for audio, _ in audio_and_text(tmp_path / "overlap" / "data" / "train.jsonl")}
    assert trained == {"anna"}  # a recording in both is tested, never trained on


def test_too_little_to_measure_is_refused_in_one_line(corpus: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "few"
    assert main([str(corpus), "--out", str(out), "--test-split", "recording", "--test-share", "0.3"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == ("asr.finetune: error: only 7 test utterances held out (recording): at least 10 are needed "
                       "to measure what fine-tuning gains; record more, raise --test-share, or give a --test MANIFEST")
    assert not out.exists()  # nothing written, nothing scored


def test_a_bad_row_is_one_line_and_the_rest_is_kept(corpus: Path, tmp_path: Path, capsys) -> None:
    wavs = sorted(corpus.rglob("*.wav"))
    table = corpus.parent / "with_bad_rows.csv"
    table.write_text("path,text,speaker\n" + "".join(f"{p.relative_to(corpus.parent)},hello {p.stem},{p.parent.name}\n"
                                                      for p in wavs)
                     + "mine/anna/missing.wav,not there,anna\n" + "mine/bob/00.wav,too,many,fields\n")
    out = tmp_path / "kept"
    assert main([str(table), "--out", str(out), "--check"]) == 0
    err = capsys.readouterr().err.splitlines()
    skipped = [line for line in err if "skipped" in line and "asr.manifest: skipped:" in line]
    assert len(skipped) == 2 and "with_bad_rows.csv:26:" in skipped[0] and "with_bad_rows.csv:27:" in skipped[1]
    summary = next(line for line in err if line.startswith("asr.manifest: wrote"))
    assert "24 utterances" in summary and "2 skipped" in summary
    assert err[-1].startswith("asr.finetune: warning: 12 of the 12 test utterances")  # both read "hello NN"
    assert len((out / "data" / "all.jsonl").read_text().splitlines()) == 24

    (out / "run").mkdir()  # as if a fine-tune had started on this data: other data must not overwrite it
    before = {name: (out / "data" / name).read_text() for name in ("all.jsonl", "train.jsonl", "test.jsonl")}
    broken = tmp_path / "broken.jsonl"
    broken.write_text((out / "data" / "all.jsonl").read_text() + "{not json\n")
    assert main([str(broken), "--out", str(out)]) == 1
    assert capsys.readouterr().err.strip() == (f"asr.finetune: error: {broken}:25: broken manifest line "
                                               "(JSONDecodeError: Expecting property name enclosed in double quotes: "
                                               "line 1 column 2 (char 1))")
    changed = tmp_path / "fewer.jsonl"
    changed.write_text("".join(line + "\n" for line in (out / "data" / "all.jsonl").read_text().splitlines()[1:]))
    changed_rows = changed.read_text().replace('"audio": "', f'"audio": "{out / "data"}/')
    changed.write_text(changed_rows)
    assert main([str(changed), "--out", str(out)]) == 1
    assert "holds a fine-tune of other data" in capsys.readouterr().err
    assert {name: (out / "data" / name).read_text() for name in before} == before  # nothing lost


def test_a_run_stopped_with_ctrl_c_resumes_and_gives_a_model_folder_every_tool_takes(
        corpus: Path, replay_root: Path, model_path: Path, small_lm: Path, tmp_path: Path, speech_wav: Path,
        capsys) -> None:
    out = tmp_path / "mine"
    options = [str(corpus), "--out", str(out), "--model", str(model_path), "--lm", str(small_lm),
               "--replay-data-root", str(replay_root),
               "--replay-share", "0.95", "--workers", "1", "--threads", "1"]  # 95% replay: enough steps to stop
    command = [sys.executable, "-m", "asr.finetune", *options]
    first = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "COLUMNS": "120"}, start_new_session=True)
    seen = ""
    while "step " not in seen.rpartition("fine-tuning:")[2]:  # the progress bar shows training under way
        char = first.stderr.read(1)
        assert char, f"finished before training showed progress: {seen[-2000:]}"
        seen += char
    os.killpg(first.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the loader process hears it too
    seen += first.stderr.read()
    first.stdout.read()
    assert first.wait(timeout=120) == 130, seen[-3000:]
    assert seen.rstrip().splitlines()[-1] == "asr.finetune: interrupted (Ctrl-C)" and "Traceback" not in seen
    stopped = torch.load(out / "run" / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert stopped["global_step"] > 0 and stopped["callbacks"]["Budget"]["trained_s"] > 0
    assert not (out / "model.safetensors").exists()

    second = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "1 speaker held out" in second.stderr and "before" in second.stdout and "after" in second.stdout
    trained = json.loads((out / "run" / "trained.json").read_text())
    planned = int(second.stderr.split(" steps (Ctrl-C")[0].rsplit(" ", 1)[1])
    assert trained["steps"] == planned > stopped["global_step"]  # it went on from the saved step to the end
    for name in ("model.safetensors", "onnx/model.json", "onnx/encoder.int8.onnx", "lm.arpa.gz", "MODEL_CARD.md",
                 "config.yaml", "finetune.json"):
        assert (out / name).is_file(), name
    assert not (out / "run" / "checkpoints").exists()  # done: the checkpoints are dropped
    info = json.loads((out / "finetune.json").read_text())
    assert set(info["lm"]["new_words"]) == {w.upper() for w in WORDS} and info["lm"]["missing"] == []
    assert info["before"]["beam"]["utts"] == info["after"]["beam"]["utts"] == 12
    assert info["training"]["replay_minutes"] > 0 and info["training"]["trained_blocks"] == "all 2 blocks"
    assert info["training"]["criterion"] == "crf"  # the bundled model's own loss, by default
    assert info["training"]["criterion_order"] == 3  # with its trigram denominator
    assert (out / "run" / "phone_lm.txt").is_file()  # its denominator: the run's transcripts in the model's units
    card = (out / "MODEL_CARD.md").read_text()
    assert "| before |" in card and "| after |" in card and "Per speaker" in card and "the loss CTC-CRF (a trigram" in card
    from omegaconf import OmegaConf
    assert OmegaConf.load(out / "config.yaml").freeze == ["subsampling."]  # the front end did not train

    if lm_binary.find_tool() is not None:  # scripts/setup.sh builds it: the folder's LM then loads at once
        assert lm_binary.fast_form(out / "lm.arpa.gz") == out / "lm.klm"
    model = asr.load(out)
    assert model.decoder.lm.path == out / "lm.arpa.gz"
    assert all(model.decoder.lm.words.contains(w.upper()) for w in WORDS)  # the data's words are possible outputs
    capsys.readouterr()
    assert transcribe.main(["--model", str(out), "--plain", str(speech_wav)]) == 0
    assert "error" not in capsys.readouterr().err

    assert main(options) == 0  # finished: the same command only reports again
    assert capsys.readouterr().out == second.stdout


def test_test_sentences_also_in_the_training_text_are_warned_of(corpus: Path, tmp_path: Path, capsys) -> None:
    assert main([str(corpus), "--out", str(tmp_path / "voices"), "--check"]) == 0  # each speaker's own sentences
    assert "warning" not in capsys.readouterr().err
    assert main([str(corpus), "--out", str(tmp_path / "repeats"), "--test-split", "recording", "--test-share", "0.5",
                 "--check"]) == 0  # anna's and bob's sentences each come twice: the split parts some pairs
    texts = {name: [json.loads(line)["text"] for line in (tmp_path / "repeats" / "data" / name).read_text().splitlines()]
             for name in ("train.jsonl", "test.jsonl")}
    repeated = sum(text in texts["train.jsonl"] for text in texts["test.jsonl"])
    assert repeated > 0
    warning = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warning == [f"asr.finetune: warning: {repeated} of the 12 test utterances say a sentence the training "
                       "text also holds, which the word LM learns: the after figures then measure memory, not "
                       "hearing. Hold out recordings of sentences never said in training (--test MANIFEST)"]


def test_the_guard_is_replay_where_the_mixture_is_found_else_distillation() -> None:
    assert guard_of(Recipe(), replay_found=True) == "replay"
    assert guard_of(Recipe(), replay_found=False) == "distill"  # a user's folder: no shared corpora beside it
    assert guard_of(Recipe(replay_share=0.0), replay_found=True) == "distill"
    assert guard_of(Recipe(guard="l2sp"), replay_found=True) == "l2sp"
    with pytest.raises(ValueError, match="no replay corpus found"):
        guard_of(Recipe(guard="replay"), replay_found=False)
    assert anchor_of(Recipe(), "replay") == {"kind": "none", "weight": 0.0}
    assert anchor_of(Recipe(guard_weight=3.0), "distill") == {"kind": "distill", "weight": 3.0}


def test_replay_asked_for_where_there_is_none_is_refused_before_any_scoring(corpus: Path, tmp_path: Path,
                                                                             capsys) -> None:
    out = tmp_path / "replay"
    assert main([str(corpus), "--out", str(out), "--guard", "replay", "--replay-data-root", str(tmp_path / "no")]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "asr.finetune: error: --guard replay: no replay corpus found (give --replay-data-root) or --replay-share is 0")
    assert not (out / "scores").exists()


def test_outside_the_checkout_the_plan_line_names_the_guard_and_training_is_anchored(
        corpus: Path, model_path: Path, small_lm: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    user = tmp_path / "user"
    user.mkdir()
    monkeypatch.chdir(user)  # the default replay root, ../shared/data, is not there
    out = user / "mine"
    assert main([str(corpus), "--out", str(out), "--model", str(model_path), "--lm", str(small_lm), "--max-steps",
                 "2", "--workers", "0", "--threads", "1"]) == 0
    err = capsys.readouterr().err
    assert ("asr.finetune: guard against forgetting: distillation toward the starting model (weight 1; no replay "
            "corpus under ../shared/data)") in err
    from omegaconf import OmegaConf
    assert OmegaConf.load(out / "config.yaml").anchor == {"kind": "distill", "weight": 1.0}
    info = json.loads((out / "finetune.json").read_text())
    assert info["training"]["guard"] == "distill" and info["training"]["replay_minutes"] == 0
    assert "distillation toward the starting model" in (out / "MODEL_CARD.md").read_text()


def neural_lm_header(path: Path, words: list[str]) -> Path:
    """A file with a neural word LM's header and no weights: all that the vocabulary check reads."""
    from asr.decoding.neural_lm import FORMAT  # noqa: PLC0415

    header = json.dumps({"__metadata__": {"format": FORMAT, "words": "\n".join(["<s>", "<unk>", *words])}}).encode()
    path.write_bytes(len(header).to_bytes(8, "little") + header)
    return path


def test_the_second_pass_is_kept_for_ordinary_english_and_left_out_for_a_new_vocabulary(tmp_path: Path,
                                                                                         capsys) -> None:
    """Its LM would rank down the words it lacks: kept while at most 5% of the training words are outside it."""
    from asr.training.finetune.pipeline import keeps_second_pass  # noqa: PLC0415

    second = neural_lm_header(tmp_path / "second.safetensors", ["THE", "CAT", "SAT", "ON", "A", "MAT"])
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"audio": "a.wav", "text": t}) + "\n"
                             for t in ["The cat sat on the mat."] * 19 + ["A zorblax sat."]))
    assert keeps_second_pass(second, train)  # 1 word in 123 outside
    train.write_text(json.dumps({"audio": "a.wav", "text": "the zorblax sat on the quintaro"}) + "\n")
    assert not keeps_second_pass(second, train)  # 2 in 6
    assert "33.3% of the training words are outside" in capsys.readouterr().err
