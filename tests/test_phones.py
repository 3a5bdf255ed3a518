"""Phone-CTC models: training targets through the lexicon (a toy run), and decoding phones to words through it."""
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from asr.model.loader import load_model
from asr.text.lexicon import Lexicon
from asr.text.normalize import normalize
from asr.training.data import load_sources
from asr.training.train import new_module, train
from helpers import CONF, SPEECHOCEAN, small_manifest

needs_data = pytest.mark.skipif(not SPEECHOCEAN.exists(), reason=f"{SPEECHOCEAN} not found")


def phone_config(run_dir: Path, manifest: Path, lexicon: Path, *overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("train", [
            "model=tiny", "attention=w16_h4", "tokenizer.kind=phone", f"tokenizer.lexicon={lexicon}",
            f"run_dir={run_dir}", "data.num_workers=0", f"data.train=[{{manifest: {manifest}}}]",
            f"data.valid=[{{manifest: {manifest}}}]", "data.max_batch_seconds=1000", "trainer.accelerator=cpu",
            "trainer.devices=1", "threads=1", "trainer.enable_progress_bar=false", "data.augment.speeds=[1.0]",
            "data.augment.noise_prob=0", *overrides])


def small_lexicon(tmp_path: Path) -> Path:
    """Some of the manifest's words; the bundled G2P spells the others."""
    lexicon = Lexicon({"BUT": [("B", "AH", "T")], "THEY": [("DH", "EY",)], "GOOD": [("G", "UH", "D")],
                       "IT'S": [("IH", "T", "S")], "A": [("AH",), ("EY",)]})
    return lexicon.save(tmp_path / "lexicon.txt")


@needs_data
def test_a_toy_phone_model_trains_and_records_its_units(tmp_path):
    manifest = small_manifest(tmp_path, 8)
    cfg = phone_config(tmp_path / "run", manifest, small_lexicon(tmp_path), "trainer.max_steps=3",
                       "trainer.check_val_every_n_epoch=1")
    path = train(cfg)
    encoder, tokenizer, _ = load_model(path)
    assert tokenizer.kind == "phone" and tokenizer.word_boundary and tokenizer.units()[2] == "|"
    assert encoder.cfg.vocab_size == tokenizer.vocab_size == 42
    metrics = (tmp_path / "run" / "logs" / "version_0" / "metrics.csv").read_text()
    assert "val_wer" in metrics  # with phones: the phone error rate of the greedy phones


@needs_data
def test_phone_targets_come_from_the_lexicon_then_the_g2p(tmp_path):
    manifest = small_manifest(tmp_path, 8)
    cfg = phone_config(tmp_path / "run", manifest, small_lexicon(tmp_path), "tokenizer.word_boundary=false")
    module = new_module(cfg, load_sources(cfg.data.train))
    tokenizer = module.tokenizer
    assert not tokenizer.word_boundary and module.encoder.cfg.vocab_size == tokenizer.vocab_size == 41
    units = tokenizer.units()
    assert [units[i] for i in tokenizer.encode("BUT THEY")] == ["B", "AH", "T", "DH", "EY"]
    for utt in load_sources(cfg.data.train):  # every word spelled (the G2P fills the lexicon's gaps)
        assert 1 not in tokenizer.encode(normalize(utt.text)), utt.text
