"""Training smoke tests: a tiny model overfits 20 real utterances; an interrupted run resumes."""
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import jiwer
import pytest
import torch
from hydra import compose, initialize_config_dir

from asr.audio.files import load_audio
from asr.decoding.decoder import Decoder
from asr.model.config import EncoderConfig
from asr.model.loader import load_model, random_model, save_model
from asr.model.recognizer import Recognizer
from asr.model.torch_backend import load_torch
from asr.text.tokenizer import Tokenizer
from asr.training.acoustic.config import OptimConfig
from asr.training.acoustic.data import load_sources
from asr.training.acoustic.train import export_checkpoint, module_from_model, new_module, train
from helpers import CONF, ROOT, SPEECHOCEAN, small_manifest

pytestmark = pytest.mark.skipif(not SPEECHOCEAN.exists(), reason=f"{SPEECHOCEAN} not found")


def config(run_dir: Path, manifest: Path, *overrides: str):
    no_augment = ["data.augment.speeds=[1.0]", "data.augment.noise_prob=0", "data.augment.time_masks=0",
                  "data.augment.freq_masks=0"]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("train", [
            "model=tiny", "attention=w16_h4", "tokenizer.kind=char", f"run_dir={run_dir}", "data.num_workers=0",
            f"data.train=[{{manifest: {manifest}}}]", f"data.valid=[{{manifest: {manifest}}}]",
            "data.max_batch_seconds=1000", "trainer.accelerator=cpu", "trainer.devices=1", "threads=1",
            "trainer.log_every_n_steps=1", "trainer.enable_progress_bar=false", *no_augment, *overrides])


def test_tiny_model_overfits_twenty_utterances(tmp_path):
    manifest = small_manifest(tmp_path, 20)
    cfg = config(tmp_path / "run", manifest, "trainer.max_steps=400", "trainer.check_val_every_n_epoch=400",
                 "optim.lr=3e-3", "optim.warmup_steps=30", "optim.decay_steps=370", "model.d_model=96",
                 "checkpoint_every_steps=400")
    model_path = train(cfg)
    # No end-of-input tail: 400 steps on 20 recordings never showed this model digital silence, and
    # it babbles in it ("THENOO"). The test is about training; the tail is measured on real models.
    recognizer = Recognizer(*load_torch(model_path), tail_seconds=0.0)
    decoder = Decoder(recognizer.tokenizer)
    refs, hyps = [], []
    for line in manifest.read_text().splitlines():
        row = json.loads(line)
        refs.append(row["text"])
        hyps.append(decoder.text(decoder.decode(recognizer.run(load_audio(row["audio"])))))
    cer = jiwer.cer(refs, hyps)
    assert cer < 0.1, list(zip(refs, hyps))


def test_interrupted_run_resumes_from_last_checkpoint(tmp_path):
    manifest = small_manifest(tmp_path, 8)
    run = tmp_path / "run"
    keep = ["checkpoint_every_steps=1", "keep_every_steps=1", "keep_checkpoints=2"]
    train(config(run, manifest, "trainer.max_steps=3", *keep))
    first = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert first["global_step"] == 3
    train(config(run, manifest, "trainer.max_steps=5", *keep))
    second = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert second["global_step"] == 5  # continued from step 3, not restarted
    assert (run / "model.safetensors").is_file() and (run / "config.yaml").is_file()

    # the newest keep_checkpoints step checkpoints stay, and exporting several averages their weights
    # (the resumed run knows which ones it kept before the interruption and prunes them too)
    names = {p.name for p in (run / "checkpoints").glob("step*.ckpt")}
    assert names == {"step4.ckpt", "step5.ckpt"}
    kept = [run / "checkpoints" / "step4.ckpt", run / "checkpoints" / "step5.ckpt"]
    averaged = load_model(export_checkpoint(run, kept, tmp_path / "avg.safetensors"))[0].state_dict()
    a, b = (torch.load(p, map_location="cpu", weights_only=True)["state_dict"] for p in kept)
    moved = [k for k in averaged if averaged[k].is_floating_point() and not torch.equal(a[f"encoder.{k}"], b[f"encoder.{k}"])]
    assert moved  # the two steps differ, so the average is a new point
    for k in moved:
        torch.testing.assert_close(averaged[k], (a[f"encoder.{k}"] + b[f"encoder.{k}"]) / 2)
    # the export script takes checkpoints or --average N, and refuses both at once
    both = subprocess.run([sys.executable, "scripts/export_model.py", str(run), str(kept[0]), "--average", "2"],
                          cwd=ROOT, capture_output=True, text=True)
    assert both.returncode == 2 and "not both" in both.stderr


def test_fine_tuning_takes_architecture_from_the_file_and_dropout_from_the_run(tmp_path):
    encoder, tokenizer, _ = random_model(EncoderConfig(d_model=64, n_layers=2, n_heads=2, window=16, dropout=0.0))
    save_model(tmp_path / "m.safetensors", encoder, tokenizer)
    module = module_from_model(tmp_path / "m.safetensors", OptimConfig(), dropout=0.3)
    assert module.encoder.cfg == replace(encoder.cfg, dropout=0.3)
    for name, tensor in encoder.state_dict().items():
        assert torch.equal(module.encoder.state_dict()[name], tensor)


def test_a_body_moves_under_a_coarser_front_end_and_a_new_vocabulary(tmp_path):
    """init_body_from: a 40 ms character model's front end, blocks and CMVN under 80 ms frames and BPE units."""
    shape = dict(d_model=64, n_layers=2, n_heads=2, ff_mult=2, window=16, frontend="conv2d", frontend_channels=4, conv_kernel=3)
    body, _, _ = random_model(EncoderConfig(subsampling=4, **shape))
    body.cmvn.set_stats(torch.full((80,), -3.0), torch.full((80,), 2.0))
    save_model(tmp_path / "m.safetensors", body, Tokenizer("char"))
    manifest = small_manifest(tmp_path, 8)
    cfg = config(tmp_path / "run", manifest, *[f"model.{k}={v}" for k, v in shape.items()], "model.subsampling=8",
                 "tokenizer.kind=bpe", "tokenizer.vocab_size=40", f"init_body_from={tmp_path / 'm.safetensors'}")
    module = new_module(cfg, load_sources(cfg.data.train), body=cfg.init_body_from)
    assert module.encoder.cfg.subsampling == 8 and module.tokenizer.kind == "bpe"
    old, new = body.state_dict(), module.encoder.state_dict()
    taken = [name for name in new if name in old and new[name].shape == old[name].shape]
    assert any(name.startswith("blocks.") for name in taken) and "cmvn.mean" in taken
    for name in taken:
        assert torch.equal(new[name], old[name]), name
    assert {"subsampling.convs.2.weight", "subsampling.proj.weight"} <= set(taken)  # the 40 ms front end carries over
    assert set(new) - set(taken) == {"subsampling.merge.weight", "subsampling.merge.bias", "ctc.weight", "ctc.bias"}
    assert new["ctc.weight"].shape[0] == module.tokenizer.vocab_size == 40


def test_a_wall_clock_stop_ends_at_the_sooner_of_its_budget_and_its_deadline(tmp_path):
    """stop_after_minutes counts from the start of fitting; stop_at (a lent machine's end) may come first."""
    import time
    from types import SimpleNamespace

    from asr.training.acoustic.train import WallClockStop

    def trainer():
        saved = []
        strategy = SimpleNamespace(reduce_boolean_decision=lambda decision, all=True: decision)
        return SimpleNamespace(strategy=strategy, should_stop=False, saved=saved,
                               save_checkpoint=lambda path, weights_only=None: saved.append((path, weights_only)))

    for minutes, stop_at, stops in [(60, None, False), (60, time.time() - 1, True), (60, time.time() + 600, False),
                                    (0, time.time() + 600, True), (None, time.time() - 1, True)]:
        t, stop = trainer(), WallClockStop(minutes, tmp_path / "last.ckpt", stop_at)
        stop.on_train_start(t, None)
        time.sleep(0.01)
        stop.on_train_batch_end(t)
        saved_whole_state = [(tmp_path / "last.ckpt", False)]  # weights_only=False: training resumes from it
        assert t.should_stop is stops and t.saved == (saved_whole_state if stops else []), (minutes, stop_at)
