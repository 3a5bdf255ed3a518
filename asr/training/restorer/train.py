"""Train the casing and punctuation restorer: `python -m asr.training.restorer [restorer=small] [overrides]`.

Hydra composes conf/train_restorer.yaml (the `restorer` group: small is the shipped size, toy the tests').
Lightning fits `RestorerNet` (asr.text.restore.model) with cross-entropy on both heads; a network that reads
pauses (model.pause_buckets > 0) also trains on recognition-like items (`asr.training.restorer.data`); the checkpoint
with the lowest validation loss is exported to `run_dir/restorer.safetensors` and `run_dir/restorer.onnx`,
and `run_dir/metrics.json` holds its held-out scores beside the trivial baseline's. Running the same
command again resumes from the last checkpoint.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import lightning as L
import torch
import torch.nn.functional as F
from hydra.core.config_store import ConfigStore
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from omegaconf import OmegaConf
from torch import Tensor

from asr.text.restore.labels import Labelled
from asr.text.restore.metrics import RestoreScore, format_summary, score_baseline, score_restorer, time_restore
from asr.text.restore.model import RestorerConfig, RestorerNet, export_onnx, save_restorer
from asr.text.restore.noise import Confusions, Pauses
from asr.text.restore.restorer import load_restorer
from asr.training.acoustic.config import OptimConfig, TrainerConfig
from asr.training.acoustic.module import warmup_cosine
from asr.training.restorer.data import (IGNORE, RestorerDataConfig, RestorerDataModule, build_vocab, read_recognized,
                                        read_sentences)

log = logging.getLogger("asr.training.restorer")


@dataclass
class RestorerTrainConfig:
    model: RestorerConfig = field(default_factory=RestorerConfig)
    data: RestorerDataConfig = field(default_factory=RestorerDataConfig)
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=3e-3, warmup_steps=200, decay_steps=6000))
    trainer: TrainerConfig = field(default_factory=lambda: TrainerConfig(max_epochs=6, log_every_n_steps=50))
    run_dir: str = "runs/restorer"  # logs, checkpoints, the exported model files and metrics.json
    seed: int = 0
    threads: int = 2  # torch intra-op threads on CPU


ConfigStore.instance().store(name="restorer_schema", node=RestorerTrainConfig)


class RestorerModule(L.LightningModule):
    """Cross-entropy of the case and mark heads, summed; validation loss and held-out scores."""

    def __init__(self, cfg: RestorerConfig, optim: OptimConfig):
        super().__init__()
        self.net, self.optim_cfg = RestorerNet(cfg), optim
        self.score = RestoreScore()

    def loss(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        cases, marks = self.net(batch["ids"], batch["pauses"], batch["lengths"])  # (B, T, 3), (B, T, 5)
        loss = F.cross_entropy(cases.flatten(0, 1), batch["cases"].flatten(), ignore_index=IGNORE) \
            + F.cross_entropy(marks.flatten(0, 1), batch["marks"].flatten(), ignore_index=IGNORE)
        return loss, cases, marks

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        loss, _, _ = self.loss(batch)
        self.log("train_loss", loss, prog_bar=True, batch_size=batch["ids"].shape[0])
        return loss

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        loss, cases, marks = self.loss(batch)
        self.log("val_loss", loss, prog_bar=True, batch_size=batch["ids"].shape[0])
        for row, length in enumerate(batch["lengths"].tolist()):
            self.score.add(batch["cases"][row, :length].tolist(), batch["marks"][row, :length].tolist(),
                           cases[row, :length].argmax(-1).tolist(), marks[row, :length].argmax(-1).tolist())

    def on_validation_epoch_end(self) -> None:
        summary = self.score.summary()
        for key in ("period_f1", "comma_f1", "question_f1", "case_accuracy"):
            self.log(f"val_{key}", summary[key])
        self.score = RestoreScore()

    def configure_optimizers(self):
        cfg = self.optim_cfg
        optimizer = torch.optim.AdamW(self.parameters(), lr=cfg.lr, betas=tuple(cfg.betas), weight_decay=cfg.weight_decay)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: warmup_cosine(step, cfg))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def predict_with(net: RestorerNet, vocab: list[str]):
    """words -> (cases, marks) with `net` (eval mode, one sentence at a time)."""
    index = {w: i for i, w in enumerate(vocab)}

    def predict(words: list[str]) -> tuple[list[int], list[int]]:
        ids = torch.tensor([[index.get(w, 1) for w in words]])
        with torch.inference_mode():
            cases, marks = net(ids)  # no pauses: plain text
        return cases[0].argmax(-1).tolist(), marks[0].argmax(-1).tolist()
    return predict


def train_restorer(cfg: RestorerTrainConfig) -> Path:
    """Fit (or resume) the run in cfg.run_dir, export its best checkpoint; returns the safetensors path."""
    torch.set_num_threads(cfg.threads)
    L.seed_everything(cfg.seed, workers=True)
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    train, valid = read_sentences(cfg.data.train), read_sentences(cfg.data.valid)
    if not train or not valid:
        raise ValueError(f"no usable sentences in {cfg.data.train if not train else cfg.data.valid}")
    vocab_file = run_dir / "vocab.json"  # fixed by the first run, so a resumed run keeps its ids
    if vocab_file.exists():
        vocab = json.loads(vocab_file.read_text())
    else:
        vocab = build_vocab(train, cfg.model.vocab_size)
        vocab_file.write_text(json.dumps(vocab) + "\n")
    model_cfg = RestorerConfig(**{**OmegaConf.to_container(OmegaConf.structured(cfg.model)), "vocab_size": len(vocab)})
    module = RestorerModule(model_cfg, cfg.optim)
    real, pauses, confusions = [], None, None
    if model_cfg.pause_buckets:  # recognition-like items: real finals, simulated errors and pauses
        real = read_recognized(cfg.data.asr_train) if cfg.data.asr_train and Path(cfg.data.asr_train).is_file() else []
        pauses, confusions = Pauses.estimate(real, cfg.data.pause_tempo), Confusions(vocab[2:])
        log.info("restorer: %d recognized finals; pauses (s, 10/50/90%%) %s", len(real), pauses.summary())
    OmegaConf.save(cfg, run_dir / "config.yaml")
    best = ModelCheckpoint(dirpath=run_dir / "checkpoints", filename="best", monitor="val_loss", mode="min", save_last=True)
    trainer = L.Trainer(**OmegaConf.to_container(OmegaConf.structured(cfg.trainer)), default_root_dir=run_dir,
                        logger=CSVLogger(run_dir, name="logs"), callbacks=[best])
    log.info("restorer: %d train sentences, %d held out, %d words in the vocabulary, %.2fM parameters", len(train),
             len(valid), len(vocab), sum(p.numel() for p in module.net.parameters()) / 1e6)
    last = run_dir / "checkpoints" / "last.ckpt"
    data = RestorerDataModule(cfg.data, vocab, train, valid, cfg.seed, real, pauses, confusions)
    trainer.fit(module, datamodule=data,
                ckpt_path=str(last) if last.exists() else None)
    state = torch.load(best.best_model_path or str(last), map_location="cpu", weights_only=True)["state_dict"]
    module.net.load_state_dict({k.removeprefix("net."): v for k, v in state.items()})
    net = module.net.eval()
    return export_run(run_dir, net, vocab, valid)


def export_run(run_dir: Path, net: RestorerNet, vocab: list[str], valid: list[Labelled]) -> Path:
    """restorer.safetensors, restorer.onnx and metrics.json (held-out scores, model and baseline) in run_dir."""
    model = score_restorer(valid, predict_with(net, vocab)).summary()
    baseline = score_baseline(valid).summary()
    info = {"held_out": model, "baseline": baseline, "parameters": sum(p.numel() for p in net.parameters())}
    save_restorer(run_dir / "restorer.safetensors", net, vocab, info)
    export_onnx(net, vocab, run_dir / "restorer.onnx", info)
    info["ms_per_sentence_onnx_1_thread"] = time_restore(load_restorer("onnx", run_dir / "restorer.onnx").restore, valid)
    (run_dir / "metrics.json").write_text(json.dumps(info, indent=1) + "\n")
    print(format_summary("restorer", model))
    print(format_summary("baseline", baseline))
    return run_dir / "restorer.safetensors"
