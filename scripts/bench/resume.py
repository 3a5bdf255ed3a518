"""Do the optimizer's moments earn their bytes? Resume a run's last checkpoint two ways and compare.

    python scripts/bench/resume.py RUN_DIR [--steps 100] [--rewarm 200] [--dev-batches 8]

From RUN_DIR/checkpoints/last.ckpt: (a) the weights with AdamW's saved moments, the schedule going on where
it stood; (b) the same weights in float16 (as recipes/voices/state carries them) with fresh moments and the
learning rate re-warmed over --rewarm steps (what a continued period does). Both take the same --steps
training batches (drawn once from the run's own data config, augmentation included), then the mean CTC loss
on --dev-batches validation batches is printed for each, with their mean training loss over the steps.
"""
from __future__ import annotations

import argparse
import random
import sys
from dataclasses import replace
from pathlib import Path

import torch
from omegaconf import OmegaConf

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: this checkout's asr
from asr.training.acoustic.config import OptimConfig, TrainConfig, register_configs  # noqa: E402
from asr.training.acoustic.datamodule import SpeechDataModule  # noqa: E402
from asr.training.acoustic.train import module_from_model  # noqa: E402

register_configs()


def batches(loader, count: int) -> list[dict[str, torch.Tensor]]:
    out = []
    for batch in loader:
        out.append(batch)
        if len(out) == count:
            break
    return out


def run(module, optimizer, schedule, train: list[dict], dev: list[dict]) -> tuple[float, float]:
    """(mean training loss over `train`, mean validation loss on `dev` afterwards)."""
    module.train()
    losses = []
    for batch in train:
        loss, _, _ = module.ctc_loss(batch)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 5.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    module.eval()
    with torch.no_grad():
        dev_loss = sum(module.ctc_loss(b)[0].item() for b in dev) / len(dev)
    return sum(losses) / len(losses), dev_loss


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", type=Path)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--rewarm", type=int, default=200)
    p.add_argument("--dev-batches", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    cfg: TrainConfig = OmegaConf.merge(OmegaConf.structured(TrainConfig), OmegaConf.load(a.run_dir / "config.yaml"))
    checkpoint = torch.load(a.run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    position = checkpoint["global_step"] + cfg.optim.step_offset
    optim = OptimConfig(**{**OmegaConf.to_container(cfg.optim), "step_offset": position})
    base = module_from_model(a.run_dir / "initial.safetensors", optim, cfg.model.dropout)
    data = SpeechDataModule(cfg.data, base.tokenizer)
    data.cfg.num_workers = 0
    random.seed(0)
    torch.manual_seed(0)
    train, dev = batches(data.train_dataloader(), a.steps), batches(data.val_dataloader(), a.dev_batches)
    weights = {k: v for k, v in checkpoint["state_dict"].items()}
    results = {}
    for name in ("saved moments", "fresh moments, re-warmed"):
        fresh = name.startswith("fresh")
        module = module_from_model(a.run_dir / "initial.safetensors", replace(optim, rewarm_steps=a.rewarm if fresh else 0),
                                   cfg.model.dropout)
        module.load_state_dict({k: v.half().float() if fresh and v.is_floating_point() and not k.startswith("encoder.cmvn")
                                else v for k, v in weights.items()})
        setup = module.configure_optimizers()
        optimizer, schedule = setup["optimizer"], setup["lr_scheduler"]["scheduler"]
        if not fresh:
            optimizer.load_state_dict(checkpoint["optimizer_states"][0])
        torch.manual_seed(1)  # the same dropout masks for both
        results[name] = run(module, optimizer, schedule, train, dev)
        print(f"{name:<26} mean train loss over {a.steps} steps {results[name][0]:.4f}, "
              f"dev loss after {results[name][1]:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
