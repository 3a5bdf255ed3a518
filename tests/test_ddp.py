"""Multi-device training: the bucket sampler's shards, and a toy DDP run on 2 CPU processes (gloo).

The run goes through a small driver script (the `python -m asr.training` entry point plus a hook that
records which utterances each rank loaded) in a subprocess, so that Lightning can re-launch the
script for rank 1 as it does on a multi-GPU machine.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from asr.model.loader import load_model
from asr.training.acoustic.data import BucketBatchSampler, even_batches
from helpers import CONF, ROOT, SPEECHOCEAN, small_manifest

UTTERANCES = 6
BUDGET = 4.6  # seconds of audio per batch: 3 batches of these 6 utterances, one halved for 2 ranks
DRIVER = """
import json, os
import hydra
import torch.distributed as dist
from asr.training.acoustic import data
from asr.training.acoustic.train import train

RECORD = os.environ["ASR_TEST_RECORD"]  # folder for the per-rank records (the ranks inherit it)
load = data.SpeechDataset.__getitem__

def recording_getitem(self, index):
    if dist.is_initialized():  # training and validation loading (CMVN estimation on rank 0 comes before)
        split = "train" if self.augment is not None else "valid"
        with open(os.path.join(RECORD, f"rank{dist.get_rank()}.jsonl"), "a") as f:
            f.write(json.dumps({"split": split, "index": index}) + "\\n")
    return load(self, index)

data.SpeechDataset.__getitem__ = recording_getitem

@hydra.main(config_path=CONF_DIR, config_name="train", version_base="1.3")
def main(cfg):
    train(cfg)

main()
"""


@pytest.mark.parametrize("count, world", [(1, 2), (2, 2), (5, 2), (13, 3), (13, 8), (40, 4)])
def test_bucket_sampler_gives_every_rank_a_disjoint_share_of_equal_length(count: int, world: int) -> None:
    durations = [1.0 + (i * 7 % 11) / 5 for i in range(count)]
    for shuffle in (True, False):
        shards = [list(BucketBatchSampler(durations, 6.0, shuffle, rank=r, world_size=world)) for r in range(world)]
        assert len({len(s) for s in shards}) == 1  # no rank runs out of batches before another
        for shard in shards:
            for batch in shard:
                assert max(durations[i] for i in batch) * len(batch) <= 6.0
        seen = [i for shard in shards for batch in shard for i in batch]
        assert set(seen) == set(range(count))
        if count >= world:  # utterances are only repeated when there are fewer of them than ranks
            assert len(seen) == count


def test_even_batches_halves_the_largest_batch() -> None:
    assert even_batches([[0, 1, 2, 3], [4, 5], [6]], 2) == [[0, 1], [2, 3], [4, 5], [6]]
    assert even_batches([[0], [1]], 2) == [[0], [1]]


def test_lightning_reaches_set_epoch_and_epochs_are_reshuffled() -> None:
    """Lightning calls set_epoch on `loader.batch_sampler.sampler` only (lightning.fabric _set_sampler_epoch)."""
    from lightning.fabric.utilities.data import _set_sampler_epoch

    sampler = BucketBatchSampler([1.0 + i / 10 for i in range(30)], 3.0, shuffle=True, rank=0, world_size=1)
    loader = torch.utils.data.DataLoader(range(30), batch_sampler=sampler)
    first = list(sampler)
    _set_sampler_epoch(loader, 1)
    assert sampler.epoch == 1 and list(sampler) != first


def ddp_train(run: Path, manifest: Path, record: Path, *overrides: str) -> subprocess.CompletedProcess:
    """One toy `strategy=ddp devices=2` run on CPU through the recording driver; killed (with its ranks) on a hang."""
    driver = run.parent / "driver.py"
    driver.write_text(DRIVER.replace("CONF_DIR", repr(str(CONF))))
    record.mkdir(parents=True, exist_ok=True)
    args = ["model=tiny", "attention=w16_h4", "tokenizer.kind=char", f"run_dir={run}", "data.num_workers=0",
            f"data.train=[{{manifest: {manifest}}}]", f"data.valid=[{{manifest: {manifest}}}]",
            f"data.max_batch_seconds={BUDGET}", "data.augment.speeds=[1.0]", "data.augment.noise_prob=0",
            "data.augment.time_masks=0", "data.augment.freq_masks=0", "cmvn_utterances=2", "threads=1",
            "trainer.accelerator=cpu", "trainer.devices=2", "trainer.strategy=ddp", "trainer.log_every_n_steps=1",
            "trainer.enable_progress_bar=false", "checkpoint_every_steps=1", *overrides]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "ASR_TEST_RECORD": str(record)}
    process = subprocess.Popen([sys.executable, str(driver), *args], cwd=ROOT, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the run's own session: the driver and the rank it launched
        output, _ = process.communicate()
        pytest.fail(f"DDP run hung:\n{output[-3000:]}")
    assert process.returncode == 0, output[-3000:]
    return subprocess.CompletedProcess(process.args, process.returncode, output)


def loaded(record: Path, rank: int, split: str) -> list[int]:
    """Utterance indices rank `rank` loaded for `split`, in order."""
    rows = [json.loads(line) for line in (record / f"rank{rank}.jsonl").read_text().splitlines()]
    return [r["index"] for r in rows if r["split"] == split]


@pytest.mark.skipif(not SPEECHOCEAN.exists(), reason=f"{SPEECHOCEAN} not found")
@pytest.mark.serial  # two ranks, one a core
def test_ddp_on_two_cpu_processes_shards_data_exports_once_and_resumes(tmp_path: Path) -> None:
    manifest = small_manifest(tmp_path, UTTERANCES)
    run = tmp_path / "run"
    durations = [json.loads(line)["duration"] for line in manifest.read_text().splitlines()]
    per_rank = len(BucketBatchSampler(durations, BUDGET, shuffle=True, rank=0, world_size=2))
    alone = len(BucketBatchSampler(durations, BUDGET, shuffle=True, rank=0, world_size=1))
    assert per_rank >= 2 and alone % 2 == 1  # several steps, and a batch halved so that the ranks' counts match

    first = ddp_train(run, manifest, tmp_path / "first", "trainer.max_epochs=1")
    train = [loaded(tmp_path / "first", rank, "train") for rank in (0, 1)]  # one epoch
    assert train[0] and train[1] and not set(train[0]) & set(train[1]), train  # each rank its own share ...
    assert sorted(train[0] + train[1]) == list(range(UTTERANCES)), train  # ... and together all, once
    valid = [set(loaded(tmp_path / "first", rank, "valid")) for rank in (0, 1)]  # sanity check + 1 validation
    assert valid[0] and not valid[0] & valid[1] and valid[0] | valid[1] == set(range(UTTERANCES)), valid
    steps = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)["global_step"]
    assert steps == per_rank  # one optimizer step per batch of each rank's share, in step with each other
    assert first.stdout.count("exported ") == 1  # rank 0 alone exports
    encoder, tokenizer, info = load_model(run / "model.safetensors")
    assert info["steps"] == steps and encoder.cfg.vocab_size == tokenizer.vocab_size
    assert (run / "config.yaml").is_file() and not list(run.glob(".initial*"))
    metrics = (next((run / "logs").glob("version_*")) / "metrics.csv").read_text()
    assert "val_cer" in metrics and "train_loss" in metrics

    ddp_train(run, manifest, tmp_path / "second", "trainer.max_epochs=2")
    resumed = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert resumed["global_step"] == 2 * per_rank and resumed["epoch"] == 1  # continued, not restarted
    second = [loaded(tmp_path / "second", rank, "train") for rank in (0, 1)]
    assert not set(second[0]) & set(second[1]) and sorted(second[0] + second[1]) == list(range(UTTERANCES))
    assert load_model(run / "model.safetensors")[2]["steps"] == 2 * per_rank
