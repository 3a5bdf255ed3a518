"""Bring your own corpus: `python -m asr.manifest` builds a manifest from a folder of audio with transcripts
beside it (then a model=tiny smoke run trains on it) or from a Common Voice-like TSV, and reports what it
skipped; a manifest without durations is batched by the real ones (read from the audio headers), and one
whose audio cannot be read is refused in one line; the LibriSpeech recipe trains on the subsets it has."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from asr.corpus.manifest import ManifestError, read_manifest
from asr.model.loader import load_model
from asr.training.acoustic.config import register_configs
from asr.training.acoustic.data import BucketBatchSampler, SourceConfig, load_sources
from conftest import run_module, tone, write
from helpers import CONF, ROOT
from test_recipes import fake_librispeech

SPOKEN = {"anna/one.wav": "One!", "anna/two.wav": "Two, too.", "anna/three.wav": "three",
          "bob/four.wav": "Four", "bob/five.wav": "five", "bob/six.wav": "Six 6"}


def corpus(folder: Path) -> Path:
    """A folder of short tones, each with its transcript beside it (.txt, one .lab), two speakers' subfolders."""
    for number, (name, text) in enumerate(SPOKEN.items()):
        audio = folder / name
        audio.parent.mkdir(parents=True, exist_ok=True)
        write(audio, tone(0.6 + 0.1 * number, freq=200.0 + 60 * number, seed=number))
        audio.with_suffix(".lab" if number == 2 else ".txt").write_text(text + "\n")
    return folder


def rows(manifest: Path) -> list[dict]:
    return [json.loads(line) for line in manifest.read_text().splitlines()]


def test_a_folder_of_wav_and_txt_becomes_a_manifest_and_trains_a_tiny_model(tmp_path):
    out = tmp_path / "manifests" / "train.jsonl"
    built = run_module("asr.manifest", str(corpus(tmp_path / "corpus")), "--out", str(out))
    assert built.returncode == 0, built.stderr
    assert "6 utterances" in built.stderr and "0 skipped" in built.stderr
    by_audio = {row["audio"]: row for row in rows(out)}
    assert set(by_audio) == {f"../corpus/{name}" for name in SPOKEN}  # relative to the manifest's folder
    assert by_audio["../corpus/anna/three.wav"] == {"audio": "../corpus/anna/three.wav", "duration": 0.8,
                                                    "text": "three", "speaker": "anna"}  # from the .lab
    assert by_audio["../corpus/bob/six.wav"]["text"] == "Six 6"  # as written: training normalises it

    run = tmp_path / "run"
    trained = subprocess.run(
        [sys.executable, "-m", "asr.training", "model=tiny", "attention=w16_h4", "tokenizer.kind=char",
         f"data.train=[{{manifest: {out}}}]", f"data.valid=[{{manifest: {out}}}]", "data.num_workers=0",
         "trainer.max_steps=3", "trainer.accelerator=cpu", "trainer.devices=1", "threads=1",
         "trainer.enable_progress_bar=false", f"run_dir={run}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "HYDRA_FULL_ERROR": "1"})
    assert trained.returncode == 0, trained.stderr[-3000:]
    encoder, tokenizer, _ = load_model(run / "model.safetensors")
    assert encoder.cfg.n_layers == 2 and tokenizer.kind == "char"  # conf/model/tiny.yaml


def test_a_manifest_without_durations_is_batched_by_the_real_durations(tmp_path):
    seconds = [1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    for i, length in enumerate(seconds):
        write(tmp_path / f"{i}.wav", np.zeros(round(16000 * length), np.float32))
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps({"audio": f"{i}.wav", "text": "A"}) + "\n" for i in range(len(seconds))))
    assert [u.duration for u in read_manifest(manifest)] == [None] * 6  # transcribe/evaluate read no headers

    utts = load_sources([SourceConfig(manifest=str(manifest))], max_duration=5.0)
    assert [u.duration for u in utts] == seconds[:-1]  # the 6 s one is over max_duration
    batches = list(BucketBatchSampler([u.duration for u in utts], 4.0, shuffle=False))
    assert batches == [[0, 1], [2], [3], [4]]  # not one batch of everything


def test_a_source_can_hold_speakers_out(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps({"audio": f"{i}.wav", "duration": 1.0, "text": "A", "speaker": who}) + "\n"
                                for i, who in enumerate(["ann", "bob", "ann", "cy"])))
    kept = load_sources([SourceConfig(manifest=str(manifest), speakers_out=["ann"], repeat=2)])
    assert [u.speaker for u in kept] == ["bob", "cy", "bob", "cy"]


def test_unreadable_audio_in_a_manifest_without_durations_is_refused_in_one_line(tmp_path):
    write(tmp_path / "ok.wav", tone(0.5))
    (tmp_path / "junk.wav").write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk")
    manifest = tmp_path / "m.jsonl"
    for bad in ("gone.wav", "junk.wav"):
        manifest.write_text(json.dumps({"audio": "ok.wav", "text": "A"}) + "\n"
                            + json.dumps({"audio": bad, "text": "B"}) + "\n")
        with pytest.raises(ManifestError) as refused:
            load_sources([SourceConfig(manifest=str(manifest))])
        message = str(refused.value)
        assert message.startswith(f"{manifest}:2: {tmp_path / bad}: ") and "\n" not in message, message


def test_a_common_voice_tsv_becomes_a_manifest_with_the_defaults(tmp_path):
    cv = tmp_path / "cv-corpus" / "en"
    (cv / "clips").mkdir(parents=True)
    sentences = ['He said "yes', "It's 5 o'clock.", "Gone missing"]
    for i in range(2):
        write(cv / "clips" / f"common_voice_en_{i}.wav", tone(0.5 + i))
    lines = ["client_id\tpath\tsentence_id\tsentence\tup_votes\tdown_votes\tage"]
    lines += [f"speaker{i % 2}\tcommon_voice_en_{i}.wav\tid{i}\t{text}\t2\t0\t" for i, text in enumerate(sentences)]
    (cv / "validated.tsv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "cv.jsonl"
    built = run_module("asr.manifest", "--table", str(cv / "validated.tsv"), "--out", str(out))
    assert built.returncode == 0, built.stderr
    clips = "cv-corpus/en/clips"  # relative to the manifest's folder
    assert rows(out) == [
        {"audio": f"{clips}/common_voice_en_0.wav", "duration": 0.5, "text": 'He said "yes', "speaker": "speaker0"},
        {"audio": f"{clips}/common_voice_en_1.wav", "duration": 1.5, "text": "It's 5 o'clock.", "speaker": "speaker1"}]
    assert f"{cv / 'validated.tsv'}:4: {cv / 'clips' / 'common_voice_en_2.wav'}: no such file" in built.stderr
    assert "2 utterances" in built.stderr and "1 skipped (1 missing audio)" in built.stderr

    csv = tmp_path / "list.csv"  # other names: one flag each
    csv.write_text('file,words\ncv-corpus/en/clips/common_voice_en_1.wav,"one, two"\n')
    unnamed = run_module("asr.manifest", "--table", str(csv), "--out", str(out))
    assert unnamed.returncode == 1 and unnamed.stderr.count("\n") == 1
    assert ("no text column (sentence or text or transcript; columns: file, words); name it with --text-column"
            in unnamed.stderr)
    named = run_module("asr.manifest", "--table", str(csv), "--text-column", "words", "--out", str(out))
    assert named.returncode == 0, named.stderr
    assert rows(out) == [{"audio": "cv-corpus/en/clips/common_voice_en_1.wav", "duration": 1.5, "text": "one, two"}]


def test_the_builder_reports_what_it_skips_and_fails_when_nothing_is_usable(tmp_path):
    folder = corpus(tmp_path / "corpus")
    write(folder / "bob" / "untold.wav", tone(0.3))  # no transcript
    (folder / "bob" / "broken.wav").write_bytes(b"not audio at all")
    (folder / "bob" / "broken.txt").write_text("broken")
    (folder / "bob" / "silent.flac").write_bytes(b"")
    (folder / "bob" / "silent.txt").write_text(" ... \n")  # says nothing: the file is not even opened
    (folder / "bob" / "lonely.txt").write_text("no audio beside me")
    out = tmp_path / "train.jsonl"
    built = run_module("asr.manifest", str(folder), "--out", str(out))
    assert built.returncode == 0, built.stderr
    lines, bob = built.stderr.splitlines(), folder / "bob"
    assert f"asr.manifest: skipped: {bob / 'untold.wav'}: no transcript beside it (untold.txt or untold.lab)" in lines
    assert any(line.startswith(f"asr.manifest: skipped: {bob / 'broken.wav'}: not readable audio") for line in lines)
    assert f"asr.manifest: skipped: {bob / 'silent.flac'}: empty transcript (nothing to say once normalised)" in lines
    assert f"asr.manifest: {bob / 'lonely.txt'}: transcript without audio" in lines
    assert lines[-1] == (f"asr.manifest: wrote {out}: 6 utterances, 0.00 h, 2 speakers; 3 skipped (1 unreadable audio, "
                         "1 empty transcript, 1 no transcript); 1 transcripts without audio")
    assert len(lines) == 5 and len(rows(out)) == 6

    nothing = tmp_path / "nothing"
    nothing.mkdir()
    write(nothing / "a.wav", tone(0.3))  # and no transcript
    none = tmp_path / "none.jsonl"
    empty = run_module("asr.manifest", str(nothing), "--out", str(none))
    assert empty.returncode == 1 and not none.exists()
    assert empty.stderr.splitlines()[-1] == f"asr.manifest: error: no usable utterance in {nothing}; {none} not written"
    for bad in (["--out", "x.jsonl"], [str(folder), "--table", "t.tsv", "--out", "x.jsonl"],
                [str(tmp_path / "missing"), "--out", "x.jsonl"],
                ["--table", str(folder / "anna" / "one.txt"), "--out", "x.jsonl"]):  # not a .csv or .tsv
        refused = run_module("asr.manifest", *bad)
        assert refused.returncode in (1, 2) and refused.stderr.count("\n") == 1, (bad, refused.stderr)


def test_check_manifest_warns_about_missing_durations_and_counts_the_real_ones(tmp_path):
    write(tmp_path / "a.wav", np.zeros(16000 * 72, np.float32), subtype="PCM_16")  # 0.02 h
    write(tmp_path / "b.wav", tone(0.5))
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio": "a.wav", "text": "A", "speaker": "x"}) + "\n"
                        + json.dumps({"audio": "b.wav", "duration": 36.0, "text": "B", "speaker": "y"}) + "\n")
    checked = subprocess.run([sys.executable, str(ROOT / "recipes/check_manifest.py"), str(manifest)],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    assert checked.stderr.startswith(f"warning: {manifest}: 1 of 2 rows have no duration")
    assert checked.stdout == f"{manifest}: 2 utterances, 0.03 h, 2 speakers\n"  # 72 s from the header + 36 s given


def test_librispeech_trains_on_whichever_training_subsets_were_prepared(tmp_path, monkeypatch):
    tree = tmp_path / "LibriSpeech"
    fake_librispeech(tree)  # dev-clean
    shutil.copytree(tree / "dev-clean", tree / "train-clean-100")  # and one of the three training subsets
    monkeypatch.chdir(tmp_path)  # the experiment reads data/librispeech/ under the working folder
    prepared = subprocess.run([sys.executable, str(ROOT / "recipes/librispeech/prepare.py"), "--root", str(tree),
                               "--out", "data/librispeech"], capture_output=True, text=True)
    assert prepared.returncode == 0, prepared.stderr
    assert "train.jsonl: train-clean-100" in prepared.stdout and not prepared.stderr
    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("train", ["experiment=librispeech"])
    train, valid = load_sources(cfg.data.train), load_sources(cfg.data.valid)
    assert [u.text for u in train] == [u.text for u in valid] == ["GO DO YOU HEAR",
                                                                  "BUT IN LESS THAN FIVE MINUTES THE STAIRCASE GROANED"]
    assert all(u.audio.is_file() and "train-clean-100" in str(u.audio) for u in train)
