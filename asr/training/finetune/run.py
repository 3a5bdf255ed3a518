"""The fine-tuning run of `python -m asr.finetune`: the recipe as a training config, trained in the run folder
within a time budget, stopped cleanly on Ctrl-C, and written out as a model folder's weights and ONNX export.

    steps = count_steps(durations, recipe.batch_seconds)      # of one epoch over those utterances
    cfg = train_config(recipe, start, start_cfg, run_dir, train, passes, replay, steps, "cpu", 2, 1)
    outcome = fine_tune(cfg, minutes=20, total_hours=1.5)     # Trained(...), or None when interrupted
    export_weights(cfg.run_dir, DIR)                           # DIR/model.safetensors, from the final state
    export_onnx_folder(DIR)                                    # DIR/onnx/

`run_dir/trained.json` marks a finished run: the same command run again goes straight on from there.
"""
from __future__ import annotations

import json
import logging
import shutil
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import lightning as L
from omegaconf import DictConfig, OmegaConf

from asr.features import FbankConfig
from asr.model.config import EncoderConfig
from asr.model.folder import ONNX, WEIGHTS
from asr.training.acoustic.config import TrainConfig
from asr.training.acoustic.data import AugmentConfig, BucketBatchSampler
from asr.training.finetune.recipe import CRITERIA, Recipe, frozen
from asr.training.acoustic.progress import AudioBar, Budget
from asr.training.acoustic.train import export_checkpoint, train

DONE = "trained.json"


def count_steps(durations: list[float], batch_seconds: float) -> int:
    """The optimizer steps of one epoch over utterances of these durations (the training loader's batches)."""
    return len(BucketBatchSampler(durations, batch_seconds, shuffle=True, rank=0, world_size=1))


def train_config(recipe: Recipe, start: str | Path, start_cfg: EncoderConfig, run_dir: Path, train_manifest: Path,
                 passes: int, replay: Path | None, steps: int, device: str, threads: int, workers: int,
                 seed: int = 0, anchor: dict | None = None) -> DictConfig:
    """The training config (an OmegaConf TrainConfig, as `python -m asr.training` composes one) of a fine-tune
    of the model at `start` on `train_manifest` (`passes` times) and `replay`, over `steps` steps, pulled toward
    the starting model by `anchor` (AnchorConfig's fields; None: not)."""
    sources = [{"manifest": str(train_manifest), "repeat": passes}] + ([{"manifest": str(replay)}] if replay else [])
    gpu, index = device.startswith("cuda"), device.partition(":")[2]
    overrides = {
        "model": asdict(start_cfg), "run_dir": str(run_dir), "init_from": str(start), "seed": seed,
        "threads": threads, "freeze": frozen(start_cfg, recipe.train_blocks), "select_by": "train_loss",
        "checkpoint_every_steps": 50, "keep_checkpoints": 0, "anchor": anchor or {"kind": "none", "weight": 0.0},
        "criterion": CRITERIA[recipe.criterion],
        "data": {"train": sources, "valid": [], "max_batch_seconds": recipe.batch_seconds, "num_workers": workers,
                 "features": start_cfg.features, "augment": asdict(AugmentConfig(**recipe.augment))},
        "optim": {"lr": recipe.lr, "warmup_steps": min(recipe.warmup_steps, max(steps // 10, 1)),
                  "decay_steps": steps, "final_ratio": recipe.final_ratio},
        "trainer": {"accelerator": "gpu" if gpu else "cpu", "devices": f"{index}," if index else "1",  # "N,": GPU N
                    "precision": "bf16-mixed" if gpu else "32-true", "max_epochs": 1,
                    "max_steps": steps, "limit_val_batches": 0, "enable_progress_bar": False,
                    "check_val_every_n_epoch": None, "log_every_n_steps": 10},
    }
    return OmegaConf.merge(OmegaConf.structured(TrainConfig), overrides)


@dataclass
class Trained:
    """A finished run (DIR/run/trained.json)."""

    steps: int
    minutes: float  # of training, over every process of the run
    audio_hours: float  # of audio trained on (each batch's frames, augmentation included)


class FinalState(L.Callback):
    """Saves `last` when fitting ends however it ends (the step limit, the budget): the state to export."""

    def __init__(self, last: Path):
        self.last, self.steps = last, 0

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.steps = trainer.global_step
        trainer.save_checkpoint(self.last, weights_only=False)


def quiet_lightning() -> None:
    """Lightning's notes (devices, the model summary, a loader with few workers, no validation) are for a
    developer; the person fine-tuning sees the progress bar and the results. The run's logs keep the rest."""
    for name in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.WARNING)
    for message in (".*does not have many workers.*", ".*could not find the monitored key.*",
                    ".*smaller than the logging interval.*", ".*`limit_val_batches=0`.*", ".*LeafSpec.*",
                    ".*exists and is not empty.*",  # the run folder of a resumed run
                    ".*your dataloader is not resumable.*"):  # a resumed run starts its epoch again (by design)
        warnings.filterwarnings("ignore", message=message)


def fine_tune(cfg: DictConfig, minutes: float, total_hours: float) -> Trained | None:
    """Fit (or resume) the run of `cfg` (an OmegaConf TrainConfig) for at most `minutes` of training in all;
    None when Ctrl-C stopped it (its state saved: the same call resumes). A finished run is not fitted again."""
    run_dir = Path(cfg.run_dir)
    if (run_dir / DONE).is_file():
        return Trained(**json.loads((run_dir / DONE).read_text()))
    last = run_dir / "checkpoints" / "last.ckpt"
    budget, final = Budget(minutes, last), FinalState(last)
    features = FbankConfig.of(cfg.data.features)
    bar = AudioBar(total_hours, features.hop_length / features.sample_rate)
    quiet_lightning()
    try:
        train(cfg, [budget, bar, final])
    except SystemExit:  # Lightning ends the process this way after a KeyboardInterrupt
        if budget.interrupted:
            return None
        raise
    finally:
        bar.close()
    if budget.interrupted:
        return None
    trained = Trained(final.steps, round(budget.trained_seconds() / 60, 2), round(bar.seconds / 3600, 3))
    (run_dir / DONE).write_text(json.dumps(asdict(trained)) + "\n")
    return trained


def export_weights(run_dir: str | Path, out_dir: Path) -> Path:
    """out_dir/model.safetensors from the run's final state (written whole, then renamed into place)."""
    run_dir = Path(run_dir)
    partial = out_dir / f".{WEIGHTS}.partial"
    export_checkpoint(run_dir, [run_dir / "checkpoints" / "last.ckpt"], out=partial)
    partial.replace(out_dir / WEIGHTS)
    return out_dir / WEIGHTS


def export_onnx_folder(out_dir: Path) -> Path:
    """out_dir/onnx/ (fp32 and int8 graphs) from out_dir/model.safetensors, written whole, then renamed into place."""
    from asr.model.export import export_onnx  # noqa: PLC0415 (onnx loads only here)
    from asr.model.loader import load_model  # noqa: PLC0415

    partial, final = out_dir / f".{ONNX}.partial", out_dir / ONNX
    shutil.rmtree(partial, ignore_errors=True)
    encoder, tokenizer, info = load_model(out_dir / WEIGHTS)
    export_onnx(encoder, tokenizer, info, partial, int8=True)
    shutil.rmtree(final, ignore_errors=True)
    partial.replace(final)
    return final
