"""Callbacks for a run that a person watches and may stop: a time budget that survives Ctrl-C (the loader
processes leave Ctrl-C to the training process, which saves the run) and a progress bar in hours of audio
(`python -m asr.finetune`).

Both keep their state in the run's checkpoints (Lightning saves a callback's `state_dict` with the
weights), so the minutes and audio of a run stopped and started again add up.
"""
from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

import lightning as L
from tqdm import tqdm

from asr.training.acoustic.train import WallClockStop


class Budget(WallClockStop):
    """`minutes` of training over every process of the run: the time earlier processes trained counts.
    Ctrl-C saves `last` (the whole state) before Lightning ends the process, so running the same
    command again resumes from that step; `interrupted` tells the caller it happened."""

    def __init__(self, minutes: float, last: Path):
        super().__init__(minutes, last)
        self.before, self.began, self.interrupted = 0.0, None, False
        self.ctrl_c = None  # this process's Ctrl-C handler while the loader processes start

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        """The loader processes (data.num_workers) start before fitting does: they start with Ctrl-C ignored
        and leave it to this process, which saves the run and ends them (each would print a traceback)."""
        if threading.current_thread() is threading.main_thread():
            self.ctrl_c = signal.signal(signal.SIGINT, signal.SIG_IGN)

    def _restore_ctrl_c(self) -> None:
        if self.ctrl_c is not None:
            signal.signal(signal.SIGINT, self.ctrl_c)
            self.ctrl_c = None

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._restore_ctrl_c()

    def trained_seconds(self) -> float:
        """Seconds of training so far, earlier processes' included."""
        return self.before + (time.monotonic() - self.began if self.began is not None else 0.0)

    def state_dict(self) -> dict:
        return {"trained_s": self.trained_seconds()}

    def load_state_dict(self, state_dict: dict) -> None:
        self.before = float(state_dict.get("trained_s", 0.0))

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._restore_ctrl_c()  # the loaders have started (Lightning starts them before this hook)
        super().on_train_start(trainer, pl_module)
        self.began = time.monotonic()
        self.deadline -= self.before

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        if not isinstance(exception, KeyboardInterrupt):
            return
        self.interrupted = True
        if self.began is not None and trainer.global_step > 0:  # before the first step there is nothing new
            trainer.save_checkpoint(self.last, weights_only=False)


class AudioBar(L.Callback):
    """A progress bar on stderr in hours of audio trained on (each batch's feature frames) out of `total_hours`,
    with the step and the training loss."""

    def __init__(self, total_hours: float, frame_seconds: float):
        self.total_hours, self.frame_seconds = total_hours, frame_seconds
        self.seconds, self.bar = 0.0, None

    def state_dict(self) -> dict:
        return {"audio_s": self.seconds}

    def load_state_dict(self, state_dict: dict) -> None:
        self.seconds = float(state_dict.get("audio_s", 0.0))

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.bar = tqdm(total=round(self.total_hours, 3), initial=round(self.seconds / 3600, 3), unit="h",
                        desc="fine-tuning", file=sys.stderr, mininterval=1.0, dynamic_ncols=True,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.2f}/{total:.2f} h of audio "
                                   "[{elapsed}<{remaining}{postfix}]")

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch: dict,
                           batch_idx: int) -> None:
        seconds = float(batch["feat_lens"].sum()) * self.frame_seconds
        self.seconds += seconds
        if self.bar is not None:
            if self.seconds / 3600 > self.bar.total:  # the plan's hours are an estimate: never past 100%
                self.bar.total = round(self.seconds / 3600, 3)
            self.bar.update(seconds / 3600)
            loss = trainer.callback_metrics.get("train_loss")
            self.bar.set_postfix_str(f"step {trainer.global_step}" + (f", loss {float(loss):.3f}" if loss is not None
                                                                       else ""), refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.close()

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self.close()
