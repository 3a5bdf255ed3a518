"""Train a model: `python -m asr.training experiment=mixture [key=value ...]` (Hydra).

Everything lands in one run folder (`run_dir`): the composed config, CSV logs, checkpoints and
the exported `model.safetensors`. Running the same command again resumes from the last checkpoint.
"""
from __future__ import annotations

import json
import logging
import math
import os
import random
import time
from dataclasses import replace
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from omegaconf import OmegaConf

from asr.model.config import EncoderConfig
from asr.model.loader import average_weights, load_model, save_model
from asr.text.g2p import load_g2p
from asr.text.lexicon import Lexicon
from asr.text.normalize import normalize
from asr.text.tokenizer import Tokenizer
from asr.training.acoustic.anchor import enabled as anchor_enabled
from asr.training.acoustic.config import OptimConfig, TokenizerConfig, TrainConfig, TrainerConfig, register_configs
from asr.training.acoustic.crf import CriterionConfig, DenominatorGraph, PhoneLM
from asr.training.acoustic.data import SpeechDataset, load_sources
from asr.training.acoustic.pronunciations import CHOICES
from asr.training.acoustic.datamodule import SpeechDataModule
from asr.training.hardware import cpu_has_bf16
from asr.training.acoustic.whisper.distill import enabled as distill_enabled
from asr.training.acoustic.module import CTCModule
from asr.training.acoustic.whisper.weights import take_whisper

log = logging.getLogger("asr.training.acoustic.train")
register_configs()  # the structured schema that conf/train.yaml composes on


def estimate_cmvn(dataset: SpeechDataset, count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Global per-bin mean and std of log-mel frames over `count` random training utterances."""
    indices = random.Random(seed).sample(range(len(dataset)), min(count, len(dataset)))
    frames = torch.cat([dataset[i][0] for i in indices])
    return frames.mean(dim=0), frames.std(dim=0)


def module_from_model(path: str | Path, optim: OptimConfig, dropout: float, chunk: int | None = None,
                      max_chunk: int = 0, norm: EncoderConfig | None = None) -> CTCModule:
    """A module holding an exported model's weights, tokenizer and CMVN (fine-tuning or a resumed run).
    The architecture comes from the file; dropout, a training choice, from the run's config, and so do
    `chunk` when given (lookahead inside chunks of that many frames) and `max_chunk` (biases for chunks up to
    that long); lookahead biases the file lacks start at zero. `norm`, when given, is a config whose frame
    normalisation (norm, norm_prior, norm_horizon) replaces the file's."""
    encoder, tokenizer, _ = load_model(path)
    cfg = replace(encoder.cfg.with_chunk(encoder.cfg.chunk if chunk is None else chunk, max_chunk), dropout=dropout)
    if norm is not None:
        cfg = replace(cfg, norm=norm.norm, norm_prior=norm.norm_prior, norm_horizon=norm.norm_horizon)
    module = CTCModule(cfg.validate(), optim, tokenizer)
    missing, _ = module.encoder.load_state_dict(extend_ahead_biases(encoder.state_dict(), module.encoder), strict=False)
    unexpected_missing = [name for name in missing if not name.endswith("attn.ahead_bias")]
    if unexpected_missing:
        raise ValueError(f"{path}: no weights for {', '.join(unexpected_missing)}")
    return module


def extend_ahead_biases(state: dict[str, torch.Tensor], encoder: torch.nn.Module) -> dict[str, torch.Tensor]:
    """`state` with each lookahead bias (H, C-1) shorter than `encoder`'s (H, M-1) widened to it: its
    distances -(C-1) .. -1 kept in the last columns, the longer distances zero."""
    target = encoder.state_dict()
    widened = {}
    for name, tensor in state.items():
        if name.endswith("attn.ahead_bias") and name in target and tensor.shape[1] < target[name].shape[1]:
            tensor = torch.cat([tensor.new_zeros(tensor.shape[0], target[name].shape[1] - tensor.shape[1]), tensor], 1)
        widened[name] = tensor
    return widened


def new_module(cfg: TrainConfig, train_utts: list, body: str | None = None) -> CTCModule:
    """A fresh module: tokenizer trained on the training text; with `body` (an exported model), every tensor of
    the same name and shape taken from it (`take_matching`); CMVN estimated from the training audio unless
    the body gave it."""
    texts = sorted({normalize(u.text) for u in train_utts})
    tokenizer = Tokenizer.train(texts, cfg.tokenizer.kind, cfg.tokenizer.vocab_size, cfg.tokenizer.word_boundary)
    attach_lexicon(tokenizer, cfg.tokenizer)
    model_cfg = EncoderConfig(**{**OmegaConf.to_container(OmegaConf.structured(cfg.model)),
                                 "vocab_size": tokenizer.vocab_size})
    model_cfg = model_cfg.with_chunk(model_cfg.chunk, max(cfg.chunks, default=0))
    module = CTCModule(model_cfg, cfg.optim, tokenizer)
    taken = take_matching(module.encoder, body) if body else set()
    if cfg.init_from_whisper:
        taken |= take_whisper(module.encoder, cfg.init_from_whisper)
    if "cmvn.mean" not in taken:
        dataset = SpeechDataset(train_utts, tokenizer, None, features=model_cfg.features)
        mean, std = estimate_cmvn(dataset, cfg.cmvn_utterances, cfg.seed)
        module.encoder.cmvn.set_stats(mean, std)
    return module


def attach_lexicon(tokenizer: Tokenizer, cfg: TokenizerConfig) -> Tokenizer:
    """A phone tokenizer spelling through `cfg.lexicon`, with the G2P (`cfg.g2p`, else the bundled one) for words
    outside it; other kinds unchanged."""
    if tokenizer.kind == "phone" and tokenizer.lexicon is None:
        lexicon = Lexicon.load(cfg.lexicon, g2p=load_g2p(cfg.g2p))
        log.info("phones: %d words in %s, word boundary %s", len(lexicon), cfg.lexicon, tokenizer.word_boundary)
        tokenizer.with_lexicon(lexicon)
    return tokenizer


def take_matching(encoder: torch.nn.Module, path: str | Path) -> set[str]:
    """Load into `encoder` every tensor of the exported model at `path` with the same name and shape (e.g. a
    40 ms model's front end, blocks and CMVN under 80 ms frames and a subword output layer); their names."""
    source = load_model(path)[0].state_dict()
    target = encoder.state_dict()
    taken = {name: tensor for name, tensor in source.items() if name in target and target[name].shape == tensor.shape}
    if not taken:
        raise ValueError(f"init_body_from={path}: no tensor has this model's names and shapes")
    encoder.load_state_dict(taken, strict=False)
    log.info("init_body_from: %d of %d tensors taken; new: %s", len(taken), len(target),
             ", ".join(sorted(set(target) - set(taken))))
    return set(taken)


def initial_module(cfg: TrainConfig, initial: Path, is_global_zero: bool, timeout: float = 3600.0) -> CTCModule:
    """The run's starting module. Rank 0 builds it (from init_from, init_body_from, or a new tokenizer and CMVN) and
    writes `initial` once, atomically; the other ranks wait for that file and load it, so every rank
    holds the same tokenizer and CMVN even when a launcher (torchrun, SLURM) starts them all at once."""
    if initial.exists():
        return module_from_model(initial, cfg.optim, cfg.model.dropout)
    if not is_global_zero:
        deadline = time.monotonic() + timeout
        while not initial.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"rank 0 did not write {initial} within {timeout:.0f} s")
            time.sleep(1.0)
        return module_from_model(initial, cfg.optim, cfg.model.dropout)
    if sum(map(bool, (cfg.init_from, cfg.init_body_from, cfg.init_from_whisper))) > 1:
        raise ValueError("give one of init_from (the whole model), init_body_from (its matching tensors) and "
                         "init_from_whisper (Whisper's encoder)")
    if cfg.init_from:
        norm = None if cfg.init_norm is None else replace(EncoderConfig(), norm=cfg.init_norm, norm_prior=cfg.model.norm_prior,
                                                         norm_horizon=cfg.model.norm_horizon)
        module = module_from_model(cfg.init_from, cfg.optim, cfg.model.dropout, cfg.init_chunk, max(cfg.chunks, default=0),
                                   norm)
    else:
        utterances = load_sources(cfg.data.train, cfg.data.max_duration, cfg.data.skip_bad)
        module = new_module(cfg, utterances, body=cfg.init_body_from)
    partial = initial.with_name(f".{initial.stem}.{os.getpid()}{initial.suffix}")
    save_model(partial, module.encoder, module.tokenizer)
    os.replace(partial, initial)
    return module


def trainer_options(cfg: TrainerConfig) -> dict:
    """lightning.Trainer's keyword arguments; precision "auto" resolved for this machine: bf16 autocast where
    it is fast (a GPU with bfloat16, a CPU with AMX or AVX-512 BF16), float32 elsewhere."""
    options = OmegaConf.to_container(OmegaConf.structured(cfg))
    if options["precision"] == "auto":
        gpu = options["accelerator"] in ("auto", "gpu", "cuda") and torch.cuda.is_available()
        fast = torch.cuda.is_bf16_supported() if gpu else cpu_has_bf16()
        options["precision"] = "bf16-mixed" if fast else "32-true"
        log.info("trainer.precision=auto: %s", options["precision"])
    return options


def attach_criterion(module: CTCModule, cfg: CriterionConfig, train_utts: list, run_dir: Path) -> None:
    """CTC-CRF: the denominator's phone LM estimated on the training transcripts (as the model's units, each
    word spelled as its targets are), written to run_dir/phone_lm.txt; plain CTC needs nothing."""
    if cfg.kind == "ctc":
        return
    if cfg.kind != "crf":
        raise ValueError(f"criterion.kind={cfg.kind!r}: one of ctc, crf")
    lm = PhoneLM.of_transcripts((u.text for u in train_utts), module.tokenizer.encode, cfg.order)
    graph = DenominatorGraph(lm)
    lm.write(run_dir / "phone_lm.txt", names=module.tokenizer.units())
    log.info("criterion crf: %d-gram over %d training utterances' transcripts, %d histories, %d states, %d arcs, "
             "lambda %g", cfg.order, len(train_utts), len(lm.counts), graph.n_states, graph.n_arcs, cfg.ctc_weight)
    module.attach_crf(graph, cfg.ctc_weight)


class WallClockStop(L.Callback):
    """Ends fitting once `minutes` of wall time have passed since it started, or at the Unix time `stop_at`
    if that comes first, saving `last` first, so a run given a time budget (a working period, a lent
    machine) stops cleanly and its next run resumes from that step."""

    def __init__(self, minutes: float | None, last: Path, stop_at: float | None = None):
        self.minutes, self.last, self.stop_at, self.deadline = minutes, last, stop_at, math.inf

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        budget = math.inf if self.minutes is None else 60 * self.minutes
        if self.stop_at is not None:
            budget = min(budget, self.stop_at - time.time())
        self.deadline = time.monotonic() + budget

    def on_train_batch_end(self, trainer: L.Trainer, *args) -> None:
        if trainer.strategy.reduce_boolean_decision(time.monotonic() > self.deadline, all=False):
            trainer.save_checkpoint(self.last, weights_only=False)  # the whole state: training resumes from it
            trainer.should_stop = True


class StepTimes(L.Callback):
    """Where fitting's wall time goes, written to `out` (JSON) when it ends: `model_s` from each batch's
    start to its end (forward, backward, optimizer step), `between_s` from a batch's end to the next one's
    start (fetching the batch: with data.num_workers=0 all of its loading and augmentation; checkpoints,
    logging), `validation_s` validation."""

    def __init__(self, out: Path):
        self.out = out
        self.totals = dict.fromkeys(("model_s", "between_s", "validation_s"), 0.0)
        self.steps, self.started, self.mark = 0, 0.0, 0.0

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.started = self.mark = time.perf_counter()

    def _lap(self, key: str) -> None:
        if not self.started:  # the sanity-check validation runs before fitting starts
            return
        now = time.perf_counter()
        self.totals[key] += now - self.mark
        self.mark = now

    def on_train_batch_start(self, *args) -> None:
        self._lap("between_s")

    def on_train_batch_end(self, *args) -> None:
        self._lap("model_s")
        self.steps += 1

    def on_validation_start(self, *args) -> None:
        self._lap("between_s")

    def on_validation_end(self, *args) -> None:
        self._lap("validation_s")

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.is_global_zero:
            wall = time.perf_counter() - self.started
            self.out.write_text(json.dumps({"steps": self.steps, "wall_s": round(wall, 1),
                                            **{k: round(v, 1) for k, v in self.totals.items()}}) + "\n")


def train(cfg: TrainConfig, extra_callbacks: list[L.Callback] = ()) -> Path:
    """Fit (or resume) the run in cfg.run_dir and export its best model; returns the model path.
    `extra_callbacks` join the run's own (checkpoints, learning rate, step times, wall-clock stop).

    Under DDP every rank runs this: only rank 0 writes the initial model, the config and the export."""
    torch.set_num_threads(cfg.threads)
    L.seed_everything(cfg.seed, workers=True)
    run_dir = Path(cfg.run_dir)
    ckpt_dir = run_dir / "checkpoints"
    run_dir.mkdir(parents=True, exist_ok=True)
    last = ckpt_dir / "last.ckpt"
    # Order matters: last.ckpt is written after the step checkpoint of the same step, so the list of
    # kept step checkpoints it stores (and a resumed run prunes from) already holds that step.
    checkpoints = [
        ModelCheckpoint(dirpath=ckpt_dir, filename="best", monitor=cfg.select_by, mode="min", save_top_k=1),
        ModelCheckpoint(dirpath=ckpt_dir, filename="step{step}", every_n_train_steps=cfg.keep_every_steps,  # to average
                        save_top_k=cfg.keep_checkpoints, monitor="step", mode="max", auto_insert_metric_name=False),
        ModelCheckpoint(dirpath=ckpt_dir, save_last=True, save_top_k=0, every_n_train_steps=cfg.checkpoint_every_steps),
    ]
    callbacks = [*checkpoints, LearningRateMonitor("step"), StepTimes(run_dir / "step_times.json"), *extra_callbacks]
    if cfg.stop_after_minutes is not None or cfg.stop_at is not None:
        callbacks.append(WallClockStop(cfg.stop_after_minutes, last, cfg.stop_at))
    # The batch sampler shards itself across ranks (BucketBatchSampler): Lightning must not try to.
    trainer = L.Trainer(**trainer_options(cfg.trainer),
                        default_root_dir=run_dir, logger=CSVLogger(run_dir, name="logs"),
                        callbacks=callbacks, use_distributed_sampler=False)
    # The ranks are known once the Trainer exists (from the launcher's environment).
    module = initial_module(cfg, run_dir / "initial.safetensors", trainer.is_global_zero)
    attach_lexicon(module.tokenizer, cfg.tokenizer)  # phones: the targets are spelled through the lexicon
    for name, parameter in module.encoder.named_parameters():
        if name.startswith(tuple(cfg.freeze)):
            parameter.requires_grad_(False)  # AdamW skips a parameter without a gradient
    if trainer.global_rank:  # rank 0's seed as on one device; the others draw their own augmentation and dropout
        L.seed_everything(cfg.seed + trainer.global_rank, workers=True)
    if distill_enabled(cfg.distill):
        module.attach_distill(cfg.distill)
    if anchor_enabled(cfg.anchor):  # after freezing (L2-SP holds the trainable weights), before a resume loads
        module.attach_anchor(cfg.anchor)
    module.set_chunk_choices(cfg.chunks)
    if trainer.is_global_zero:
        OmegaConf.save(cfg, run_dir / "config.yaml")
    if cfg.tokenizer.pronunciations not in CHOICES:
        raise ValueError(f"tokenizer.pronunciations={cfg.tokenizer.pronunciations!r}: one of {', '.join(CHOICES)}")
    aligned = cfg.tokenizer.pronunciations == "aligned" and module.tokenizer.kind == "phone"
    data = SpeechDataModule(cfg.data, module.tokenizer, cfg.distill.teacher_dir if distill_enabled(cfg.distill) else None,
                            alternatives=aligned)
    attach_criterion(module, cfg.criterion, data.train_utts, run_dir)
    log.info("train %d utts (%.1f h), valid %d utts, %.2fM parameters", len(data.train_utts),
             sum(u.duration for u in data.train_utts) / 3600, len(data.valid_utts),
             sum(p.numel() for p in module.encoder.parameters()) / 1e6)
    trainer.fit(module, datamodule=data, ckpt_path=str(last) if last.exists() else None, weights_only=True)
    if not trainer.is_global_zero:  # rank 0 exports
        return run_dir / "model.safetensors"
    best = checkpoints[0].best_model_path or str(last)
    return export_checkpoint(run_dir, [Path(best)])


def export_checkpoint(run_dir: Path, checkpoints: list[Path], out: Path | None = None) -> Path:
    """Write Lightning checkpoints of the run as a self-contained model file (default run_dir/model.safetensors).
    Several checkpoints are averaged weight by weight (as WeNet and icefall do with their last epochs)."""
    encoder, tokenizer, _ = load_model(run_dir / "initial.safetensors")  # config, tokenizer, CMVN
    states = [torch.load(path, map_location="cpu", weights_only=True) for path in checkpoints]
    encoder.load_state_dict(average_weights([{k.removeprefix("encoder."): v for k, v in s["state_dict"].items()
                                              if k.startswith("encoder.")} for s in states]))  # not the distill head
    out = out or run_dir / "model.safetensors"
    steps = [s["global_step"] for s in states]
    save_model(out, encoder, tokenizer, {"checkpoints": [p.name for p in checkpoints], "steps": max(steps),
                                         "averaged_steps": steps if len(steps) > 1 else None})
    log.info("exported %s (from %s, steps %s)", out, ", ".join(map(str, checkpoints)), steps)
    return out
