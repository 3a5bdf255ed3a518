"""Structured defaults for training (Hydra schema). YAML in conf/ and recipes override these."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore

from asr.training.acoustic.anchor import AnchorConfig
from asr.training.acoustic.crf import CriterionConfig
from asr.training.acoustic.data import DataConfig
from asr.training.acoustic.whisper.distill import DistillConfig
from asr.model.config import EncoderConfig


@dataclass
class OptimConfig:
    lr: float = 1.5e-3
    weight_decay: float = 0.01
    betas: list[float] = field(default_factory=lambda: [0.9, 0.98])
    warmup_steps: int = 500
    decay_steps: int = 20000  # cosine decay from lr to lr * final_ratio over these steps
    final_ratio: float = 0.05
    step_offset: int = 0  # the schedule's position at this run's step 0 (a run continued from an earlier one)
    rewarm_steps: int = 0  # a continued run without optimizer moments ramps its lr up again over these steps


@dataclass
class TrainerConfig:
    """Passed to lightning.Trainer: the same recipe scales from 1 CPU to multi-node GPUs."""
    accelerator: str = "auto"
    devices: str = "auto"
    num_nodes: int = 1
    strategy: str = "auto"  # e.g. ddp
    precision: str = "32-true"  # e.g. bf16-mixed on GPUs; auto: bf16-mixed where the CPU has AMX or AVX-512 BF16 (or a GPU bf16)
    max_epochs: int = 100
    max_steps: int = -1
    max_time: str | None = None  # e.g. "00:01:30:00" (DD:HH:MM:SS)
    gradient_clip_val: float = 5.0
    accumulate_grad_batches: int = 1
    log_every_n_steps: int = 10
    enable_progress_bar: bool = True
    limit_val_batches: float = 1.0
    check_val_every_n_epoch: int | None = 1
    val_check_interval: Any = None  # steps (int) or fraction of an epoch (float) between validations


@dataclass
class TokenizerConfig:
    kind: str = "bpe"  # bpe | char | phone (the 39 ARPAbet phones; val_wer is then the phone error rate)
    vocab_size: int = 256  # bpe only
    word_boundary: bool = True  # phone only: a unit "|" ends each word (false: phones alone)
    lexicon: str = "data/lexicon/cmudict.txt"  # phone only: pronunciations (python -m asr.training.g2p.lexicon)
    g2p: str | None = None  # phone only: the G2P for words outside the lexicon (None: the bundled one)
    pronunciations: str = "first"  # phone only: a word's training spelling where it has several: first (the
                                   # lexicon's usual one) | aligned (the one the model aligns best, chosen each step)


@dataclass
class TrainConfig:
    model: EncoderConfig = field(default_factory=EncoderConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    criterion: CriterionConfig = field(default_factory=CriterionConfig)  # ctc | crf (conf/criterion/)
    distill: DistillConfig = field(default_factory=DistillConfig)  # a teacher's cached frames as a second loss
    anchor: AnchorConfig = field(default_factory=AnchorConfig)  # a pull toward the starting model (a fine-tune)
    run_dir: str = "runs/default"  # logs, checkpoints and the exported model; a rerun resumes here
    init_from: str | None = None  # start from this exported model's weights, tokenizer and CMVN
    init_body_from: str | None = None  # or: a new model (this config's shape and tokenizer) taking every tensor
    # of this exported model with the same name and shape (its blocks and CMVN under a new front end or vocabulary)
    init_chunk: int | None = None  # with init_from: train that model with lookahead inside chunks of this many
    # encoder frames (model.chunk for a model read from a file; its lookahead biases start at zero)
    init_norm: str | None = None  # with init_from: normalise that model's frames this way from now on (global |
    # running, asr.model.normalise; model.norm_prior and model.norm_horizon go with running); None: as its file does
    chunks: list[int] = field(default_factory=list)  # dynamic chunk training: each training batch looks ahead
    # inside chunks of one of these sizes, drawn at random; the model holds biases for the largest and validates,
    # exports and serves at its own chunk (model.chunk, or init_chunk), which may be shorter: a shorter wait
    init_from_whisper: str | None = None  # or: Whisper's encoder (tiny.en or base from the `pretrained` extra's
    # packages, or a CTranslate2 model.bin) under model=whisper_tiny / whisper_base
    # (asr/training/acoustic/whisper/weights.py)
    seed: int = 0
    threads: int = 2  # torch intra-op threads on CPU
    checkpoint_every_steps: int = 200  # last.ckpt, for resuming
    keep_every_steps: int = 500  # step<N>.ckpt: the newest keep_checkpoints of these stay, for averaging
    keep_checkpoints: int = 6
    stop_after_minutes: float | None = None  # end this process's fitting after this wall time (last.ckpt saved)
    stop_at: float | None = None  # or at this Unix time, if sooner (a machine lent for a fixed time)
    select_by: str = "val_cer"  # validation metric that picks best.ckpt (CER tracks progress before WER moves)
    cmvn_utterances: int = 400  # training utterances used to estimate the global mean/std
    freeze: list[str] = field(default_factory=list)  # parameters whose names start with one of these do not train
    # (e.g. ["subsampling.", "blocks.0."]: the front end and the first block; asr/training/finetune/recipe.py)


CONF = Path(__file__).resolve().parents[3] / "conf"


def register_configs() -> None:
    ConfigStore.instance().store(name="train_schema", node=TrainConfig)


def compose_config(overrides: list[str]) -> Any:
    """conf/train.yaml composed with Hydra `overrides` (e.g. experiment=NAME), as `python -m asr.training` would."""
    from hydra import compose, initialize_config_dir  # noqa: PLC0415

    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="train", overrides=overrides)
