"""Hydra composition: every attention preset composes; bad values fail early, naming themselves."""
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from asr.training.acoustic.config import register_configs
from asr.model.encoder import Encoder, EncoderConfig
from asr.stream import main as stream_main
from helpers import CONF, PRESETS

register_configs()


def compose_train(*overrides):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("train", list(overrides))


@pytest.mark.parametrize("name", PRESETS)
def test_presets_compose_and_build(name):
    model = {"w100_h6": "whisper_tiny", "w100_h8": "whisper_base"}.get(name, "tiny")  # heads that divide its width
    cfg = compose_train(f"attention={name}", f"model={model}")
    model_cfg = EncoderConfig(**OmegaConf.to_container(cfg.model))
    assert (model_cfg.window is None) == (name == "full")
    Encoder(model_cfg)


def test_default_is_w50_h4_with_experiments():
    cfg = compose_train("experiment=mixture")
    assert (cfg.model.window, cfg.model.n_heads) == (50, 4)
    assert any("speechocean762/train.jsonl" in s.manifest for s in cfg.data.train)
    assert compose_train("experiment=fsdd").tokenizer.kind == "char"
    stage2 = compose_train("experiment=mixture_finetune")  # stage 2 builds on mixture and replaces its sources
    assert [s.repeat for s in stage2.data.train] == [4, 8, 1] and stage2.data.augment.time_masks == 2
    assert stage2.optim.lr < cfg.optim.lr and stage2.tokenizer.kind == cfg.tokenizer.kind == "char"
    stage3 = compose_train("experiment=mixture_refine")  # stage 3: stage 2's data, a smaller restart
    assert stage3.data.train == stage2.data.train and stage3.data.augment == stage2.data.augment
    assert stage3.optim.lr < stage2.optim.lr and stage3.trainer.max_steps == stage3.optim.decay_steps


@pytest.mark.parametrize("bad, named", [
    (dict(n_heads=5), "n_heads=5"), (dict(window=0), "window=0"), (dict(subsampling=3), "subsampling=3"),
    (dict(subsampling=4, subsampling_kernel=2), "subsampling_kernel=2"), (dict(conv_kernel=-1), "conv_kernel=-1")])
def test_invalid_model_values_are_named(bad, named):
    with pytest.raises(ValueError, match=named):
        Encoder(EncoderConfig(**bad))


def test_bad_chunk_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_info:
        stream_main(["--file", "x.wav", "--chunk-ms", "0"])
    assert exit_info.value.code == 2
    assert "--chunk-ms" in capsys.readouterr().err
