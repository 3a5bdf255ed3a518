"""The training and validation loaders of a run: its sources read once, each training utterance's augmentation
variants rendered before fitting where the config asks for them (`asr.training.acoustic.variants`), and the teacher's
cached frames beside the training batches when a run distils (`asr.training.acoustic.whisper.teacher`)."""
from __future__ import annotations

import functools
import os
import sys
import threading

import lightning as L
from lightning.fabric.utilities.seed import pl_worker_init_function
from torch.utils.data import DataLoader

from asr.corpus.manifest import Utterance
from asr.text.tokenizer import Tokenizer
from asr.training.acoustic.data import BucketBatchSampler, DataConfig, SpeechDataset, collate, load_sources
from asr.training.acoustic.variants import VariantStore


class SpeechDataModule(L.LightningDataModule):
    def __init__(self, cfg: DataConfig, tokenizer: Tokenizer, teacher_dir: str | None = None,
                 alternatives: bool = False):
        super().__init__()
        self.cfg, self.tokenizer, self.teacher_dir = cfg, tokenizer, teacher_dir
        self.alternatives = alternatives  # phones: training batches carry each word's other pronunciations
        self.train_utts = load_sources(cfg.train, cfg.max_duration, cfg.skip_bad)
        self.valid_utts = load_sources(cfg.valid, skip_bad=cfg.skip_bad)

    @functools.cached_property
    def variant_store(self) -> VariantStore | None:
        """The training set's rendered augmentation variants (None: augment on the fly)."""
        if not self.cfg.variants:
            return None
        return VariantStore(self.cfg.variants_dir, self.cfg.variants, self.cfg.augment, self.cfg.features)

    def prepare_data(self) -> None:
        """Render the training set's augmentation variants once (Lightning calls this on one process a node)."""
        if (store := self.variant_store) is not None:
            store.build([u.audio for u in self.train_utts], self.cfg.variants_workers)

    def _loader(self, utts: list[Utterance], train: bool) -> DataLoader:
        # torch and the Whisper reader: only if asked
        from asr.training.acoustic.whisper.teacher import TeacherCache  # noqa: PLC0415

        teacher = TeacherCache(self.teacher_dir) if train and self.teacher_dir else None
        dataset = SpeechDataset(utts, self.tokenizer, self.cfg.augment if train else None, self.cfg.cache_features,
                                self.variant_store if train else None, self.cfg.features, teacher,
                                self.alternatives and train)
        sampler = BucketBatchSampler([u.duration for u in utts], self.cfg.max_batch_seconds, shuffle=train)
        return DataLoader(dataset, batch_sampler=sampler, collate_fn=collate, num_workers=self.cfg.num_workers,
                          persistent_workers=self.cfg.num_workers > 0, worker_init_fn=start_loader_process)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_utts, train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.valid_utts, train=False)


def start_loader_process(worker_id: int) -> None:
    """A loader process's start: Lightning's seeding where the run asked for it (seed_everything(workers=True), which
    Lightning adds only to a loader without its own start function), and no traceback when the main process leaves
    while this one hands it a batch (Ctrl-C: the thread that passes tensors' file descriptors, multiprocessing's
    resource sharer, then sees its connection reset, which is the run ending, not an error). That thread reports
    through `sys.excepthook`, other threads through `threading.excepthook`: both are quietened for this alone."""
    if int(os.environ.get("PL_SEED_WORKERS", 0)):
        pl_worker_init_function(worker_id)
    report_thread, report = threading.excepthook, sys.excepthook

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if not _orphaned(args.exc_type, args.exc_traceback):
            report_thread(args)

    def hook(exc_type, value, tb) -> None:
        if not _orphaned(exc_type, tb):
            report(exc_type, value, tb)

    threading.excepthook, sys.excepthook = thread_hook, hook


def _orphaned(exc_type: type[BaseException], tb) -> bool:
    """Whether an exception is the resource sharer's connection reset by a main process that has gone."""
    return (tb is not None and issubclass(exc_type, (ConnectionError, EOFError))
            and any(frame.f_code.co_filename.endswith("resource_sharer.py") for frame, _ in _frames(tb)))


def _frames(tb):
    while tb is not None:
        yield tb.tb_frame, tb.tb_lineno
        tb = tb.tb_next
