"""Distillation: the full-context teacher (on a toy Whisper in CTranslate2's format), its cache, the loss,
and a tiny training run that learns the teacher's frames beside CTC and exports without its projection."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from asr.audio.files import load_audio
from asr.model.loader import load_model
from asr.training.acoustic.whisper.distill import distill_loss, enabled, stretch
from asr.training.acoustic.whisper.teacher import POOL, TeacherCache, WhisperTeacher, cache_key, fill_cache
from asr.training.acoustic.train import train
from helpers import SPEECHOCEAN, small_manifest
from test_training import config
from test_whisper_init import D, whisper_variables, write_ct2

pytestmark = pytest.mark.skipif(not SPEECHOCEAN.exists(), reason=f"{SPEECHOCEAN} not found")


@pytest.fixture
def toy_teacher(tmp_path) -> WhisperTeacher:
    variables = whisper_variables()
    variables["encoder/position_encodings/encodings"] = np.random.default_rng(1).standard_normal(
        (1500, D)).astype(np.float32)
    write_ct2(tmp_path / "model.bin", variables, {})
    return WhisperTeacher(tmp_path / "model.bin", n_heads=2)


def test_the_teacher_sees_the_whole_utterance_and_pools_to_the_student_rate(toy_teacher, tmp_path):
    wave = load_audio(json.loads(small_manifest(tmp_path, 1).read_text().splitlines()[0])["audio"])
    feats = toy_teacher.features(wave)  # (1, T, 80), floored at its own maximum minus 8 (2 after scaling)
    assert feats.shape[2] == 80 and float(feats.max() - feats.min()) <= 2.0 + 1e-6
    with torch.inference_mode():
        full = toy_teacher(feats)[0]  # (T/2, D)
        later_changed = feats.clone()
        later_changed[0, -50:] += 1.0
        changed = toy_teacher(later_changed)[0]
    assert full.shape == ((feats.shape[1] + 1) // 2, D)
    assert not torch.allclose(full[:5], changed[:5])  # full context: the end moves the start (not causal)
    frames = toy_teacher.frames(wave)
    assert frames.dtype == np.float16 and frames.shape == (-(-full.shape[0] // POOL), D)
    np.testing.assert_allclose(frames[3], full[6:8].mean(0).numpy(), rtol=1e-2, atol=1e-2)


def test_the_cache_is_filled_once_kept_for_a_copy_and_refreshed_when_the_audio_changes(toy_teacher, tmp_path):
    audio = tmp_path / "a.flac"
    source = json.loads(small_manifest(tmp_path, 1).read_text().splitlines()[0])["audio"]
    audio.write_bytes(open(source, "rb").read())
    cache_dir = tmp_path / "cache"
    first = fill_cache([audio], cache_dir, toy_teacher)
    assert first["audio_s"] > 1.0 and fill_cache([audio], cache_dir, toy_teacher)["audio_s"] == 0.0  # reused
    cache = TeacherCache(cache_dir)
    np.testing.assert_array_equal(cache.load(audio), toy_teacher.frames(load_audio(audio)))
    copy = tmp_path / "copied" / "a.flac"  # the corpus copied again (another path and time): the same frames
    copy.parent.mkdir()
    copy.write_bytes(audio.read_bytes())
    np.testing.assert_array_equal(cache.load(copy), cache.load(audio))
    audio.write_bytes(audio.read_bytes()[:-100] + bytes(50))  # rendered again into other bytes: a new key
    assert not (cache_dir / cache_key(audio)).exists()
    with pytest.raises(FileNotFoundError, match="not in the teacher cache"):
        cache.load(audio)


def test_the_loss_is_least_on_the_teacher_and_ignores_padding():
    teacher = torch.randn(2, 10, 6)
    lengths, teacher_lengths = torch.tensor([10, 7]), torch.tensor([10, 7])
    same = distill_loss(teacher.clone(), lengths, teacher, teacher_lengths)
    assert float(same) == pytest.approx(-float(torch.nn.functional.logsigmoid(torch.tensor(1.0))), abs=1e-5)
    other = distill_loss(torch.randn(2, 10, 6), lengths, teacher, teacher_lengths)
    assert float(other) > float(same) + 0.5
    padded = teacher.clone()
    padded[1, 7:] = 100.0  # past row 1's real frames: never scored
    assert float(distill_loss(padded, lengths, teacher, teacher_lengths)) == pytest.approx(float(same), abs=1e-5)
    ramp = torch.arange(10.0)[:, None].expand(10, 3)  # a change of speed stretches time linearly
    stretched = stretch(ramp, 20)
    assert stretched.shape == (20, 3) and bool((stretched[1:, 0] >= stretched[:-1, 0]).all())
    assert float(stretched[0, 0]) == pytest.approx(0.0) and float(stretched[-1, 0]) == pytest.approx(9.0)


def test_a_run_learns_the_teachers_frames_beside_ctc_and_exports_without_its_projection(toy_teacher, tmp_path):
    manifest = small_manifest(tmp_path, 6)
    audios = [json.loads(line)["audio"] for line in manifest.read_text().splitlines()]
    fill_cache(audios, tmp_path / "teacher", toy_teacher)
    cfg = config(tmp_path / "run", manifest, "trainer.max_steps=30", "trainer.check_val_every_n_epoch=100",
                 "optim.lr=3e-3", "optim.warmup_steps=5", f"distill.teacher_dir={tmp_path / 'teacher'}",
                 "distill.weight=1.0", "distill.block=1", f"distill.teacher_dim={D}", "checkpoint_every_steps=30")
    assert enabled(cfg.distill)
    model = train(cfg)
    logged = [line.split(",") for line in (tmp_path / "run" / "logs").glob("version_*/metrics.csv").__next__()
              .read_text().splitlines()]
    column = logged[0].index("train_distill")
    losses = [float(row[column]) for row in logged[1:] if row[column]]
    assert len(losses) >= 20 and np.mean(losses[-5:]) < np.mean(losses[:5])  # it learns the teacher's frames
    encoder = load_model(model)[0]
    assert not [name for name in encoder.state_dict() if "project" in name]
